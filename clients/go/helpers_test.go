package hilo

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
)

// What the in-process, real-server and benchmark tests share: many
// goroutines drawing at once, and one call measured from every goroutine.

// drawAllDistinct starts `goroutines` goroutines that each call draw
// `each` times (g: which goroutine, i: which of its calls), and fails the
// test when a call fails, when an ID comes back twice, or when fewer than
// goroutines*each distinct IDs were drawn.
func drawAllDistinct[K comparable](t *testing.T, goroutines, each int, draw func(g, i int) (K, error)) {
	t.Helper()
	var mu sync.Mutex
	seen := map[K]bool{}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id, err := draw(g, i)
				if err != nil {
					t.Errorf("draw %d of goroutine %d: %v", i, g, err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("ID %+v handed out twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	if len(seen) != goroutines*each {
		t.Fatalf("%d distinct IDs, want %d", len(seen), goroutines*each)
	}
}

// benchParallel measures `call`, made once per iteration from GOMAXPROCS
// goroutines (b.RunParallel), with its allocations.
func benchParallel(b *testing.B, call func(ctx context.Context) error) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := call(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// wantCollections fails the test unless c's table holds exactly the
// collections names (in any order).
func wantCollections(t *testing.T, c *Client, names ...string) {
	t.Helper()
	var got []string
	for name := range *c.caches.Load() {
		got = append(got, name)
	}
	sort.Strings(got)
	sort.Strings(names)
	if len(got) != len(names) {
		t.Fatalf("the client keeps %d collections %s, want %q", len(got), someNames(got), names)
	}
	for i := range got {
		if got[i] != names[i] {
			t.Fatalf("the client keeps collections %s, want %q", someNames(got), names)
		}
	}
}

// someNames quotes the first 10 names, each cut at 40 bytes, so that a
// table of a thousand names does not make a message of a hundred kilobytes.
func someNames(names []string) string {
	var b strings.Builder
	for i, name := range names {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if len(name) > 40 {
			fmt.Fprintf(&b, "%q...", name[:40])
		} else {
			fmt.Fprintf(&b, "%q", name)
		}
	}
	return "[" + b.String() + "]"
}

// wantErrors fails the test unless c's Stats().Errors are exactly want.
func wantErrors(t *testing.T, c *Client, want map[codes.Code]int64) {
	t.Helper()
	got := c.Stats().Errors
	if len(got) != len(want) {
		t.Fatalf("errors counted %v, want %v", got, want)
	}
	for code, n := range want {
		if got[code] != n {
			t.Fatalf("errors counted %v, want %v", got, want)
		}
	}
}
