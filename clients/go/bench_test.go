package hilo

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Run with -cpu 1,2 for 1 and 2 goroutines: b.RunParallel starts
// GOMAXPROCS of them. The client draws from an in-process node that
// forwards to a real hilo_server ($HILO_SERVER_BIN), so ranges (up to 2^20
// numbers) arrive ahead of need and the fast path is measured.

func benchClient(b *testing.B) *Client {
	// A test without a server is skipped (startServer), but a benchmark is
	// only ever asked for by name or pattern, and `go test -bench` prints
	// nothing for one that skipped: it would look as if it had run.
	if os.Getenv("HILO_SERVER_BIN") == "" {
		b.Fatal("HILO_SERVER_BIN is not set: the client benchmarks draw from " +
			"a real hilo_server (e.g. HILO_SERVER_BIN=build/release/service/hilo_server)")
	}
	c, err := NewFromClients(Config{}, serve(b, newFakeNode(b, "A")))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// BenchmarkAtomicAdd is the floor NextID is measured against: one shared
// counter, one atomic add per ID.
func BenchmarkAtomicAdd(b *testing.B) {
	b.ReportAllocs()
	var n int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			atomic.AddInt64(&n, 1)
		}
	})
}

func BenchmarkNextID(b *testing.B) {
	c := benchClient(b)
	benchParallel(b, func(ctx context.Context) error {
		_, err := c.NextID(ctx, "bench")
		return err
	})
}

func BenchmarkCollectionNextID(b *testing.B) {
	h := benchClient(b).Collection("bench")
	benchParallel(b, func(ctx context.Context) error {
		_, err := h.NextID(ctx)
		return err
	})
}

func BenchmarkNextDocumentID(b *testing.B) {
	c := benchClient(b)
	benchParallel(b, func(ctx context.Context) error {
		_, err := c.NextDocumentID(ctx, "bench")
		return err
	})
}

// BenchmarkUUIDString is what NextDocumentID is measured against: a random
// (version 4) UUID as a string.
func BenchmarkUUIDString(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = uuid.NewString()
		}
	})
}

// BenchmarkLatencyTail times every call, not their mean: NextID and
// NextDocumentID on 1 and 2 goroutines flat out, with prefetch on, against
// the server at HILO_LATENCY_TARGET (bench/client_latency.sh puts a proxy
// 2 ms away there), for HILO_LATENCY_SECONDS (3) each, from a cold start
// (refills included). It prints one RESULT line per run, the columns every
// language's latency benchmark prints; it asserts nothing about speed.
//
//	HILO_LATENCY_TARGET=127.0.0.1:PORT go test -run '^$' \
//	  -bench LatencyTail -benchtime 1x github.com/hilo-id/hilo/clients/go
func BenchmarkLatencyTail(b *testing.B) {
	target := os.Getenv("HILO_LATENCY_TARGET")
	if target == "" {
		b.Skip("HILO_LATENCY_TARGET is not set (bench/client_latency.sh sets it)")
	}
	seconds := 3.0
	if s := os.Getenv("HILO_LATENCY_SECONDS"); s != "" {
		var err error
		if seconds, err = strconv.ParseFloat(s, 64); err != nil {
			b.Fatal(err)
		}
	}
	for _, call := range []string{"NextId", "NextDocumentId"} {
		for _, goroutines := range []int{1, 2} {
			latencyRun(b, target, call, goroutines,
				time.Duration(seconds*float64(time.Second)))
		}
	}
}

func latencyRun(b *testing.B, target, call string, goroutines int, d time.Duration) {
	c, err := New(Config{Targets: []string{target}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	collection := fmt.Sprintf("latency-go-%s-%d-%d", call, goroutines, time.Now().UnixNano())
	per := make([]*latencyRecorder, goroutines)
	var wg sync.WaitGroup
	begin := time.Now()
	end := begin.Add(d)
	for g := range per {
		per[g] = newLatencyRecorder()
		wg.Add(1)
		go func(r *latencyRecorder) {
			defer wg.Done()
			ctx := context.Background()
			var err error
			for now := time.Now(); now.Before(end); {
				start := now
				if call == "NextId" {
					_, err = c.NextID(ctx, collection)
				} else {
					_, err = c.NextDocumentID(ctx, collection)
				}
				now = time.Now()
				r.record(now.Sub(start).Nanoseconds())
				if err != nil {
					r.errors++
				}
			}
		}(per[g])
	}
	wg.Wait()
	elapsed := time.Since(begin)
	all := newLatencyRecorder()
	for _, r := range per {
		all.merge(r)
	}
	if all.errors > 0 {
		b.Fatalf("%s: %d calls failed", call, all.errors)
	}
	fmt.Printf("RESULT lang=Go call=%s prefetch=on threads=%d calls=%d waited=%d "+
		"p50=%d p99=%d p999=%d p9999=%d max=%d slow_1us=%d seconds=%.3f\n",
		call, goroutines, all.count, c.Stats().CallsWaited,
		all.percentile(0.5), all.percentile(0.99), all.percentile(0.999),
		all.percentile(0.9999), all.max, all.slow1us, elapsed.Seconds())
}

// latencyRecorder counts call times exactly: to the nanosecond below 10 µs,
// and each slower one kept as it is. A percentile is the sample of rank
// floor(q * count), as in bench/latency_histogram.h.
type latencyRecorder struct {
	fine                        []int64 // fine[ns] calls of ns nanoseconds
	slow                        []int64 // calls of 10 µs or more
	count, max, slow1us, errors int64
}

const latencyFineNanos = 10000

func newLatencyRecorder() *latencyRecorder {
	return &latencyRecorder{fine: make([]int64, latencyFineNanos)}
}

func (r *latencyRecorder) record(ns int64) {
	if ns < 0 {
		ns = 0
	}
	if ns < latencyFineNanos {
		r.fine[ns]++
	} else {
		r.slow = append(r.slow, ns)
	}
	if ns >= 1000 {
		r.slow1us++
	}
	if ns > r.max {
		r.max = ns
	}
	r.count++
}

func (r *latencyRecorder) merge(o *latencyRecorder) {
	for i, n := range o.fine {
		r.fine[i] += n
	}
	r.slow = append(r.slow, o.slow...)
	r.count += o.count
	r.slow1us += o.slow1us
	r.errors += o.errors
	if o.max > r.max {
		r.max = o.max
	}
}

func (r *latencyRecorder) percentile(q float64) int64 {
	if r.count == 0 {
		return 0
	}
	rank := int64(q * float64(r.count))
	if rank > r.count-1 {
		rank = r.count - 1
	}
	var seen int64
	for ns, n := range r.fine {
		seen += n
		if seen > rank {
			return int64(ns)
		}
	}
	sort.Slice(r.slow, func(i, j int) bool { return r.slow[i] < r.slow[j] })
	return r.slow[rank-seen]
}
