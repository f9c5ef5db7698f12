package hilo

import (
	"fmt"
	"sort"
)

// What a client holds or handed out of each node's ranges of one collection
// (CONTRACT.md R11). A reply overlapping it is refused: the node went back
// (a store restored, a failover it did not see) and could issue those
// numbers again. Any other range of that node, below, between or above,
// repeats nothing of this client's and is taken.

const (
	// maxHeldIntervals bounds the intervals kept per node tag.
	maxHeldIntervals = 4
	// maxHeldTags bounds the node tags kept per collection; a reply of a
	// new tag past it is refused, since a tag's numbers are never forgotten
	// while the node could repeat them.
	maxHeldTags = 256
)

// interval is [low, high], both in.
type interval struct{ low, high int64 }

// heldNumbers keeps, per node tag, at most maxHeldIntervals sorted,
// disjoint intervals that cover every number of that node the client holds
// or handed out. When one more would be needed, two neighbours below the two
// highest intervals, those with the smallest gap between them, become one
// (the lowest pair on a tie): the union only grows, so a range may be
// refused that need not be, never the other way round. A range handed back loses its unused numbers. Not safe
// for concurrent use: the range cache guards it; fetches judge a copy.
type heldNumbers struct {
	byTag map[string][]interval
}

// mergeClosest joins two neighbours until at most maxHeldIntervals are left:
// of the pairs below the two highest intervals, the one with the smallest
// gap. The two highest hold the ranges in use (a healthy node's new range
// starts above every number it issued), whose unused numbers a return takes
// out again; a gap covered below them lies below numbers handed out for
// good, which a healthy node never issues again. A gap at the top would be
// issued again once the ranges above it went back (faults.stress_short saw
// that refused as INTERNAL in the C++ client).
func mergeClosest(spans []interval) []interval {
	for len(spans) > maxHeldIntervals {
		best := 0
		for i := 1; i+3 < len(spans); i++ {
			if spans[i+1].low-spans[i].high < spans[best+1].low-spans[best].high {
				best = i
			}
		}
		spans[best].high = spans[best+1].high
		spans = append(spans[:best+1], spans[best+2:]...)
	}
	return spans
}

// addInterval returns spans (sorted, disjoint) with [low, high] added;
// touching or overlapping intervals become one. spans is not changed.
func addInterval(spans []interval, low, high int64) []interval {
	all := append(append([]interval(nil), spans...), interval{low, high})
	sort.Slice(all, func(i, j int) bool {
		return all[i].low < all[j].low || (all[i].low == all[j].low && all[i].high < all[j].high)
	})
	var out []interval
	for _, s := range all {
		// s.low - 1 cannot overflow: every low is at least 1.
		if n := len(out); n > 0 && s.low-1 <= out[n-1].high {
			if s.high > out[n-1].high {
				out[n-1].high = s.high
			}
		} else {
			out = append(out, s)
		}
	}
	return mergeClosest(out)
}

// removeInterval returns spans without the numbers low..high. spans is not
// changed.
func removeInterval(spans []interval, low, high int64) []interval {
	var out []interval
	for _, s := range spans {
		if s.high < low || high < s.low {
			out = append(out, s)
			continue
		}
		if s.low < low {
			out = append(out, interval{s.low, low - 1})
		}
		if high < s.high {
			out = append(out, interval{high + 1, s.high})
		}
	}
	return mergeClosest(out)
}

// clone returns a copy that later changes to h do not touch.
func (h heldNumbers) clone() heldNumbers {
	c := heldNumbers{byTag: make(map[string][]interval, len(h.byTag))}
	for tag, spans := range h.byTag {
		c.byTag[tag] = spans // never changed in place
	}
	return c
}

// check returns why low..high of tag may not be taken, or nil.
func (h heldNumbers) check(tag string, low, high int64) error {
	spans, ok := h.byTag[tag]
	if !ok {
		if len(h.byTag) >= maxHeldTags {
			return fmt.Errorf("NextRange replied with node tag %s, but the client already keeps the numbers "+
				"of %d node tags of this collection, the most it keeps", tag, maxHeldTags)
		}
		return nil
	}
	for _, s := range spans {
		if s.low <= high && low <= s.high {
			return fmt.Errorf("NextRange replied with %d-%d of node %s, which overlaps %d-%d, numbers "+
				"the client holds or handed out of that node", low, high, tag, s.low, s.high)
		}
	}
	return nil
}

func (h *heldNumbers) add(tag string, low, high int64) {
	if h.byTag == nil {
		h.byTag = make(map[string][]interval)
	}
	h.byTag[tag] = addInterval(h.byTag[tag], low, high)
}

// remove forgets low..high of tag (numbers handed back unused).
func (h *heldNumbers) remove(tag string, low, high int64) {
	if spans, ok := h.byTag[tag]; ok && low <= high {
		h.byTag[tag] = removeInterval(spans, low, high)
	}
}
