package hilo

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

// Run with -cpu 1,2 for 1 and 2 goroutines: b.RunParallel starts
// GOMAXPROCS of them. The client draws from an in-process node, so ranges
// (up to 2^20 numbers) arrive ahead of need and the fast path is measured.

func benchClient(b *testing.B) *Client {
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
