package hilo

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	hilov1 "github.com/hilo-id/hilo/gen/go/hilo/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fakeNode is an in-process hilo node that keeps the server's rules as the
// README's "The contract" states them: the size rule, low = max(Max,
// last_max) + 1, a fresh token per range, returns applied only with the
// last range's live token, Max == end and last >= the return floor, at most
// once, and the whole return of an adjacent later range giving the earlier
// one its token and floor back. Tests can break it on purpose through its
// hooks, and read what it was asked.
type fakeNode struct {
	hilov1.UnimplementedHiLoServer
	tag string
	now func() time.Time

	mu    sync.Mutex
	colls map[string]*fakeCollection
	// Hooks, read under mu.
	gate       chan struct{}                   // NextRange waits for it to close
	nextErr    []codes.Code                    // the next NextRange calls fail with these
	mangle     func(*hilov1.NextRangeResponse) // alters every reply
	returnsErr []codes.Code                    // the next ReturnRanges calls fail with these
	noBatches  bool                            // ReturnRanges is UNIMPLEMENTED
	nextReqs   []*hilov1.NextRangeRequest      // every NextRange received
	batches    []*hilov1.ReturnRangesRequest   // every ReturnRanges received
	singles    []*hilov1.ReturnRangeRequest    // every ReturnRange received
	arrived    chan struct{}                   // gets a value per NextRange, if set
}

type fakeCollection struct {
	max, floor   int64
	token        uint64 // of the range issued last; 0 once retired
	low          int64  // of the range issued last
	prevToken    uint64 // the range before, restored by a whole return
	prevFloor    int64
	prevAdjacent bool // the last range's low was the one before's high + 1
}

const (
	fakeMinSize = 32
	fakeMaxSize = 1 << 20
)

func newFakeNode(tag string) *fakeNode {
	return &fakeNode{tag: tag, now: time.Now, colls: map[string]*fakeCollection{}}
}

func validName(name string) bool {
	if len(name) < 1 || len(name) > 256 || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func randomToken() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(err)
		}
		if t := binary.LittleEndian.Uint64(b[:]); t != 0 {
			return t
		}
	}
}

func (n *fakeNode) NextRange(ctx context.Context, req *hilov1.NextRangeRequest) (*hilov1.NextRangeResponse, error) {
	n.mu.Lock()
	n.nextReqs = append(n.nextReqs, proto.Clone(req).(*hilov1.NextRangeRequest))
	gate, arrived := n.gate, n.arrived
	var fail codes.Code
	if len(n.nextErr) > 0 {
		fail, n.nextErr = n.nextErr[0], n.nextErr[1:]
	}
	n.mu.Unlock()
	if arrived != nil {
		arrived <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if fail != codes.OK {
		return nil, status.Errorf(fail, "node %s fails on purpose", n.tag)
	}
	if !validName(req.GetCollection()) {
		return nil, status.Errorf(codes.InvalidArgument, "collection name %q is not 1-256 bytes of UTF-8 without control characters", req.GetCollection())
	}
	if req.GetLastSize() < 0 || req.GetLastMax() < 0 {
		return nil, status.Error(codes.InvalidArgument, "last_size and last_max must not be negative")
	}
	size := req.GetLastSize()
	if size < fakeMinSize {
		size = fakeMinSize
	}
	if size > fakeMaxSize {
		size = fakeMaxSize
	}
	now := n.now()
	if req.GetLastSize() > 0 && req.GetLastRangeAt() != nil {
		age := now.Sub(req.GetLastRangeAt().AsTime())
		switch {
		case age < 30*time.Second:
			size *= 2
		case age > 60*time.Second:
			size /= 2
		}
		if size < fakeMinSize {
			size = fakeMinSize
		}
		if size > fakeMaxSize {
			size = fakeMaxSize
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.colls[req.GetCollection()]
	if c == nil {
		c = &fakeCollection{}
		n.colls[req.GetCollection()] = c
	}
	low := c.max
	if req.GetLastMax() > low {
		low = req.GetLastMax()
	}
	low++
	resp := &hilov1.NextRangeResponse{
		Low: low, High: low + size - 1, NodeTag: n.tag,
		RangeAt: timestamppb.New(now), RangeToken: randomToken(),
	}
	c.prevToken, c.prevFloor, c.prevAdjacent = c.token, c.floor, c.token != 0 && low == c.max+1
	c.max, c.floor, c.token, c.low = resp.High, low-1, resp.RangeToken, low
	if n.mangle != nil {
		n.mangle(resp) // a node that breaks the contract
	}
	return resp, nil
}

// judge applies one return as the contract says; the caller holds mu.
func (n *fakeNode) judge(req *hilov1.ReturnRangeRequest) (*hilov1.ReturnRangeResponse, error) {
	if !validName(req.GetCollection()) || req.GetEnd() < 1 || req.GetLast() < 0 || req.GetLast() > req.GetEnd() {
		return nil, status.Error(codes.InvalidArgument, "bad return")
	}
	if req.GetRangeToken() == 0 {
		return nil, status.Error(codes.FailedPrecondition, "a return needs its range_token")
	}
	c := n.colls[req.GetCollection()]
	if c == nil {
		return &hilov1.ReturnRangeResponse{}, nil
	}
	ok := (req.GetNodeTag() == "" || req.GetNodeTag() == n.tag) && req.GetRangeToken() == c.token &&
		c.max == req.GetEnd() && c.floor <= req.GetLast()
	if !ok {
		return &hilov1.ReturnRangeResponse{Applied: false, Max: c.max}, nil
	}
	whole := req.GetLast() == c.low-1
	c.max, c.floor, c.token = req.GetLast(), req.GetLast(), 0
	if whole && c.prevAdjacent {
		c.token, c.floor = c.prevToken, c.prevFloor
		c.prevAdjacent, c.prevToken = false, 0
		c.low = c.floor + 1
	}
	return &hilov1.ReturnRangeResponse{Applied: true, Max: c.max}, nil
}

func (n *fakeNode) ReturnRange(ctx context.Context, req *hilov1.ReturnRangeRequest) (*hilov1.ReturnRangeResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.singles = append(n.singles, proto.Clone(req).(*hilov1.ReturnRangeRequest))
	return n.judge(req)
}

func (n *fakeNode) ReturnRanges(ctx context.Context, req *hilov1.ReturnRangesRequest) (*hilov1.ReturnRangesResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.noBatches {
		return nil, status.Error(codes.Unimplemented, "unknown method ReturnRanges")
	}
	n.batches = append(n.batches, proto.Clone(req).(*hilov1.ReturnRangesRequest))
	if len(n.returnsErr) > 0 {
		code := n.returnsErr[0]
		n.returnsErr = n.returnsErr[1:]
		return nil, status.Errorf(code, "node %s fails on purpose", n.tag)
	}
	if len(req.GetReturns()) > 1000 {
		return nil, status.Error(codes.InvalidArgument, "more than 1000 returns")
	}
	resp := &hilov1.ReturnRangesResponse{}
	for _, item := range req.GetReturns() {
		r, err := n.judge(item)
		if err != nil {
			st := status.Convert(err)
			resp.Results = append(resp.Results, &hilov1.ReturnRangeResult{Code: int32(st.Code()), Message: st.Message()})
			continue
		}
		resp.Results = append(resp.Results, &hilov1.ReturnRangeResult{Applied: r.Applied, Max: r.Max})
	}
	return resp, nil
}

// with runs f with the node's lock held (for hooks and reading records).
func (n *fakeNode) with(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f()
}

// serve runs n on an in-process listener until the test ends, and returns
// a client of it.
func serve(t testing.TB, n *fakeNode) hilov1.HiLoClient {
	t.Helper()
	lis := listen(t, n)
	conn, err := grpc.Dial("bufconn", grpc.WithInsecure(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.Dial() }))
	if err != nil {
		t.Fatalf("dial the in-process node: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return hilov1.NewHiLoClient(conn)
}

// listen runs n on an in-process listener, stopped when the test ends
// (after the cleanups registered later, such as a connection's Close).
func listen(t testing.TB, n *fakeNode) *bufconn.Listener {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	hilov1.RegisterHiLoServer(srv, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis
}
