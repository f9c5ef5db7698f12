package hilo

import (
	"testing"

	hilov1 "github.com/hilo-id/hilo/gen/go/hilo/v1"
)

func TestASpanHandsOutItsNumbersOnceAndNothingPastHigh(t *testing.T) {
	s := newSpan(&hilov1.NextRangeResponse{Low: 10, High: 12, NodeTag: "A", RangeToken: 7}, 0)
	for want := int64(0); want <= 2; want++ {
		if k, ok := s.take(); !ok || k != want {
			t.Fatalf("take = %d, %v; want offset %d", k, ok, want)
		}
	}
	for i := 0; i < 5; i++ {
		if n, ok := s.take(); ok {
			t.Fatalf("a used-up span handed out %d", n)
		}
	}
	if taken := s.retire(); taken != 3 {
		t.Fatalf("retire says %d taken, want 3 (callers that found it dry take nothing)", taken)
	}
}

func TestARetiredSpanHandsOutNothingEvenWhenItsCounterWraps(t *testing.T) {
	s := newSpan(&hilov1.NextRangeResponse{Low: 1, High: 1 << 40, NodeTag: "A", RangeToken: 7}, 0)
	s.take()
	if taken := s.retire(); taken != 1 {
		t.Fatalf("retire says %d taken, want 1", taken)
	}
	// retire leaves the counter at its top: the next adds wrap it to the
	// bottom of int64, and none of them may yield a number.
	for i := 0; i < 1000; i++ {
		if n, ok := s.take(); ok {
			t.Fatalf("take %d after retire handed out %d", i, n)
		}
	}
}
