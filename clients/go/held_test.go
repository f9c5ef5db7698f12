package hilo

import (
	"fmt"
	"math"
	"reflect"
	"testing"
)

// The interval summary of CONTRACT.md R11 (held.go): exact intervals after
// adds and removals, the merge of the closest pair, and a range refused
// exactly when it overlaps, at each edge.

const top = int64(math.MaxInt64)

// heldIs reports whether h holds exactly [low, high] of tag.
func heldIs(h heldNumbers, tag string, low, high int64) bool {
	return reflect.DeepEqual(h.byTag[tag], []interval{{low, high}})
}

func wantSpans(t *testing.T, what string, got []interval, want ...interval) {
	t.Helper()
	if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

func TestHeldTouchingRangesBecomeOne(t *testing.T) {
	wantSpans(t, "1-32 then 33-96", addInterval(addInterval(nil, 1, 32), 33, 96), interval{1, 96})
}

func TestHeldFourIntervalsAreKeptApart(t *testing.T) {
	var spans []interval
	for _, low := range []int64{1, 101, 1001} {
		spans = addInterval(spans, low, low+9)
	}
	spans = addInterval(spans, top, top)
	wantSpans(t, "four", spans, interval{1, 10}, interval{101, 110}, interval{1001, 1010}, interval{top, top})
}

func TestHeldAFifthMergesTheTwoWithTheSmallestGap(t *testing.T) {
	four := []interval{{1, 10}, {101, 110}, {1001, 1010}, {top, top}}
	// 120-130: gap 10 after 101-110, the smallest.
	wantSpans(t, "120-130", addInterval(four, 120, 130),
		interval{1, 10}, interval{101, 130}, interval{1001, 1010}, interval{top, top})
	// 50-60: gaps 40 (from 10) and 41 (to 101): joins 1-10.
	wantSpans(t, "50-60", addInterval(four, 50, 60),
		interval{1, 60}, interval{101, 110}, interval{1001, 1010}, interval{top, top})
	wantSpans(t, "four unchanged", four, interval{1, 10}, interval{101, 110}, interval{1001, 1010}, interval{top, top})
}

func TestHeldATieMergesTheLowestPair(t *testing.T) {
	wantSpans(t, "41", addInterval([]interval{{1, 1}, {11, 11}, {21, 21}, {31, 31}}, 41, 41),
		interval{1, 11}, interval{21, 21}, interval{31, 31}, interval{41, 41})
}

func TestHeldTheTwoHighestAreNeverMerged(t *testing.T) {
	wantSpans(t, "3020-3030", addInterval([]interval{{1, 10}, {1001, 1010}, {2001, 2010}, {3001, 3010}}, 3020, 3030),
		interval{1, 1010}, interval{2001, 2010}, interval{3001, 3010}, interval{3020, 3030})
}

// faults.stress_short's case: had 301-310 and 321-400 (the current range)
// become one, handing 321-400 back would leave 301-320, and the node's next
// range, 311 on, refused.
func TestHeldAGapAtTheTopIsNeverCovered(t *testing.T) {
	var h heldNumbers
	for _, r := range []interval{{1, 10}, {101, 110}, {201, 210}, {301, 310}, {321, 400}} {
		h.add("A", r.low, r.high)
	}
	h.remove("A", 321, 400)
	wantSpans(t, "A", h.byTag["A"], interval{1, 110}, interval{201, 210}, interval{301, 310})
	if err := h.check("A", 311, 374); err != nil {
		t.Fatalf("311-374: %v", err)
	}
}

func TestHeldRemoveTakesATailAWholeOrAMiddle(t *testing.T) {
	one := []interval{{1, 96}}
	wantSpans(t, "less 41-96", removeInterval(one, 41, 96), interval{1, 40})
	wantSpans(t, "less 33-96", removeInterval(one, 33, 96), interval{1, 32})
	wantSpans(t, "less 1-96", removeInterval(one, 1, 96))
	wantSpans(t, "less 40-50", removeInterval(one, 40, 50), interval{1, 39}, interval{51, 96})
	wantSpans(t, "less 6-top", removeInterval([]interval{{5, top}}, 6, top), interval{5, 5})
}

func TestHeldASplitPastFourMergesAgain(t *testing.T) {
	// 1-100 less 50-99 is 1-49 and 100-100: five, and the smallest gap is
	// 49 to 100 (51; 100 to 201 is 101), so they join again.
	wantSpans(t, "less 50-99", removeInterval([]interval{{1, 100}, {201, 210}, {301, 310}, {1001, 1010}}, 50, 99),
		interval{1, 100}, interval{201, 210}, interval{301, 310}, interval{1001, 1010})
}

func TestHeldRefusedExactlyWhenOverlappingAtEachEdge(t *testing.T) {
	var h heldNumbers
	h.add("A", 33, 96)
	h.add("A", top, top)
	for _, r := range []interval{{96, 200}, {1, 33}, {40, 50}, {1, 200}, {top - 5, top}} {
		if h.check("A", r.low, r.high) == nil {
			t.Errorf("%d-%d of A was taken; it overlaps %v", r.low, r.high, h.byTag["A"])
		}
	}
	for _, c := range []struct {
		tag       string
		low, high int64
	}{{"A", 1, 32}, {"A", 97, 128}, {"B", 33, 96}} {
		if err := h.check(c.tag, c.low, c.high); err != nil {
			t.Errorf("%d-%d of %s: %v", c.low, c.high, c.tag, err)
		}
	}
	wantSpans(t, "A", h.byTag["A"], interval{33, 96}, interval{top, top})
}

func TestHeldCloneIsIndependent(t *testing.T) {
	var h heldNumbers
	h.add("A", 1, 32)
	c := h.clone()
	h.add("A", 33, 40)
	wantSpans(t, "clone", c.byTag["A"], interval{1, 32})
	wantSpans(t, "held", h.byTag["A"], interval{1, 40})
}

func TestHeldTagsAreBoundedAndNeverForgotten(t *testing.T) {
	if maxHeldTags != 256 {
		t.Fatalf("maxHeldTags %d, want 256", maxHeldTags)
	}
	var h heldNumbers
	for i := 0; i < maxHeldTags; i++ {
		tag := fmt.Sprintf("T%d", i)
		if err := h.check(tag, 1, 1); err != nil {
			t.Fatalf("tag %d: %v", i, err)
		}
		h.add(tag, 1, 1)
		h.remove(tag, 1, 1)
	}
	if h.check("NEW", 1, 1) == nil {
		t.Fatalf("a %dth tag was taken", maxHeldTags+1)
	}
	if err := h.check("T0", 1, 1); err != nil {
		t.Fatalf("T0, known and now empty: %v", err)
	}
}
