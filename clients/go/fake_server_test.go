package hilo

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	hilov1 "github.com/hilo-id/hilo/gen/go/hilo/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
)

// fakeNode is a real hilo_server (startServer: CTest always gives one)
// behind an in-process gRPC layer that forwards every call to it, so every
// rule the client meets is the server's own: the layer keeps none of them
// (it used to keep a copy of the size rule, the tokens and the return
// rules, about 150 lines that had to follow every change of the server).
//
// It is kept only for what neither the real server nor the conformance
// suite's proxy (clients/conformance/proxy.py) can do, which the tests of
// this file need: hold a NextRange until the test lets it go (gate, with
// arrived to know it came), fail chosen calls with a chosen code
// (nextErr, returnsErr), answer ReturnRanges with UNIMPLEMENTED as a node
// older than ReturnRanges does (noBatches), alter a reply (mangle), record
// every request as the node got it, and serve over an in-process listener
// (bufconn), so that a test can control the connection itself. What the
// real server plus the proxy can show is a conformance scenario, not a
// test here (README.md, "Tests").
type fakeNode struct {
	hilov1.UnimplementedHiLoServer
	tag   string
	t     testing.TB
	node  hilov1.HiLoClient      // the real server behind the layer
	admin hilov1.HiLoAdminClient // to read its stored Max

	mu sync.Mutex
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

// newFakeNode starts a real hilo_server with node tag `tag` (and flags),
// stopped when the test ends, and the layer in front of it.
func newFakeNode(t testing.TB, tag string, flags ...string) *fakeNode {
	t.Helper()
	server := startServer(t, tag, flags...)
	conn, err := grpc.Dial(server.target, grpc.WithInsecure())
	if err != nil {
		t.Fatalf("dial hilo_server: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &fakeNode{tag: tag, t: t, node: hilov1.NewHiLoClient(conn), admin: hilov1.NewHiLoAdminClient(conn)}
}

// max is the real server's stored Max of a collection (0 if it has none).
func (n *fakeNode) max(collection string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.admin.GetCollection(ctx, &hilov1.GetCollectionRequest{Collection: collection})
	if status.Code(err) == codes.NotFound {
		return 0
	}
	if err != nil {
		n.t.Fatalf("GetCollection(%q) on node %s: %v", collection, n.tag, err)
	}
	return resp.GetCollection().GetMax()
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
	resp, err := n.node.NextRange(ctx, req)
	if err != nil {
		return nil, status.Convert(err).Err()
	}
	n.mu.Lock()
	mangle := n.mangle
	n.mu.Unlock()
	if mangle != nil {
		mangle(resp) // a node that breaks the contract
	}
	return resp, nil
}

func (n *fakeNode) ReturnRange(ctx context.Context, req *hilov1.ReturnRangeRequest) (*hilov1.ReturnRangeResponse, error) {
	n.mu.Lock()
	n.singles = append(n.singles, proto.Clone(req).(*hilov1.ReturnRangeRequest))
	n.mu.Unlock()
	resp, err := n.node.ReturnRange(ctx, req)
	if err != nil {
		return nil, status.Convert(err).Err()
	}
	return resp, nil
}

func (n *fakeNode) ReturnRanges(ctx context.Context, req *hilov1.ReturnRangesRequest) (*hilov1.ReturnRangesResponse, error) {
	n.mu.Lock()
	if n.noBatches {
		n.mu.Unlock()
		return nil, status.Error(codes.Unimplemented, "unknown method ReturnRanges")
	}
	n.batches = append(n.batches, proto.Clone(req).(*hilov1.ReturnRangesRequest))
	var fail codes.Code
	if len(n.returnsErr) > 0 {
		fail, n.returnsErr = n.returnsErr[0], n.returnsErr[1:]
	}
	n.mu.Unlock()
	if fail != codes.OK {
		return nil, status.Errorf(fail, "node %s fails on purpose", n.tag)
	}
	resp, err := n.node.ReturnRanges(ctx, req)
	if err != nil {
		return nil, status.Convert(err).Err()
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
