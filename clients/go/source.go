package hilo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	hilov1 "github.com/hilo-id/hilo/gen/go/hilo/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The server's limits for one ReturnRanges call are 1000 items and a 64 KiB
// request; batches stay under them.
const (
	maxBatchItems = 1000
	maxBatchBytes = 60 * 1024
	// ReturnRanges calls in flight at once during Close, all nodes together;
	// and per such call, to a node without ReturnRanges, the collections
	// whose single ReturnRange calls go at once.
	returnCalls       = 4
	singleReturnCalls = 16
	// Calls a return makes in all (the first and its retries), and the
	// pause before the second, doubling after that.
	returnAttempts = 3
	returnBackoff  = 50 * time.Millisecond
)

// target is one server and what the client learned about it.
type target struct {
	name   string
	client hilov1.HiLoClient
	// It answered ReturnRanges with UNIMPLEMENTED (a server older than
	// ReturnRanges): single ReturnRange calls from then on.
	noBatches atomic.Bool
}

// previous is what a NextRange request reports about the client's previous
// range of its collection (size, rangeAt, max), and what a reply is judged
// against (held).
type previous struct {
	size    int64
	rangeAt *timestamppb.Timestamp // nil if none
	// The previous range's high; after its return (unless refused), the
	// highest number handed out of that node's ranges (CONTRACT.md R4).
	max int64
	// Not sent. Per node tag, the numbers of the collection the client
	// holds or handed out from that node's ranges (a range's unused numbers
	// are dropped when it is handed back): a range of that node overlapping
	// them is refused (CONTRACT.md R11). Read only.
	held heldNumbers
}

// source calls the servers: NextRange with failover, returns to the node
// that issued a range. Safe for concurrent use.
type source struct {
	targets    []*target
	rpcTimeout time.Duration
	preferred  atomic.Int64
	failovers  atomic.Int64
	// sleep waits d or until ctx ends (tests replace it).
	sleep func(ctx context.Context, d time.Duration) error
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *source) describe() string {
	names := make([]string, len(s.targets))
	for i, t := range s.targets {
		names[i] = t.name
	}
	return strings.Join(names, ", ")
}

// next asks the preferred target for the next range of collection and, on
// UNAVAILABLE or DEADLINE_EXCEEDED or a reply that checkReply refuses, each
// other target once; the target that gave a usable range is preferred from
// then on. Each attempt has its own deadline of rpcTimeout, from the
// monotonic clock (time.Now's monotonic reading, which context.WithTimeout
// keeps).
func (s *source) next(collection string, prev previous) (*span, error) {
	if !utf8.ValidString(collection) {
		// Marshalling would fail (INTERNAL): refused here, as the server
		// would (CONTRACT.md R13).
		return nil, newError(codes.InvalidArgument, nil,
			"collection %s is not valid UTF-8; a name is 1-256 bytes of UTF-8, no control characters",
			quoteName(collection))
	}
	req := &hilov1.NextRangeRequest{
		Collection:  collection,
		LastSize:    prev.size,
		LastRangeAt: prev.rangeAt,
		LastMax:     prev.max,
	}
	var failures []string
	anyRefused := false
	first := int(s.preferred.Load())
	for i := range s.targets {
		index := (first + i) % len(s.targets)
		t := s.targets[index]
		ctx, cancel := context.WithTimeout(context.Background(), s.rpcTimeout)
		resp, err := t.client.NextRange(ctx, req)
		cancel()
		if err != nil && echoRefused(status.Code(err), req) {
			// A node far behind the one that issued the range reported
			// (CONTRACT.md R17): asked again without it. Its IDs carry its
			// own tag, and a range at or below what this client has from
			// that very node is still refused by check: none repeats.
			ctx, cancel := context.WithTimeout(context.Background(), s.rpcTimeout)
			resp, err = t.client.NextRange(ctx, &hilov1.NextRangeRequest{Collection: collection})
			cancel()
		}
		if err != nil {
			code := status.Code(err)
			if !transient(code) {
				return nil, newError(code, err, "%s: NextRange of %s: %s", t.name, quoteName(collection),
					status.Convert(err).Message())
			}
			failures = append(failures, fmt.Sprintf("%s: %s: %s", t.name, code,
				status.Convert(err).Message()))
			continue
		}
		if err := checkReply(resp, collection, prev.held); err != nil {
			anyRefused = true
			failures = append(failures, fmt.Sprintf("%s: %v", t.name, err))
			continue
		}
		s.preferred.Store(int64(index))
		if i > 0 {
			s.failovers.Add(1)
		}
		return newSpan(resp, index), nil
	}
	if anyRefused {
		return nil, newError(codes.Internal, nil, "no hilo server gave a usable range of %s: %s",
			quoteName(collection), strings.Join(failures, "; "))
	}
	return nil, newError(codes.Unavailable, nil, "no hilo server answered NextRange for %s: %s",
		quoteName(collection), strings.Join(failures, "; "))
}

// echoRefused says whether code may be a node's refusal of the previous
// range req reports: the last_max guard rail (FAILED_PRECONDITION) or a
// field it finds malformed (INVALID_ARGUMENT).
func echoRefused(code codes.Code, req *hilov1.NextRangeRequest) bool {
	echoes := req.GetLastMax() != 0 || req.GetLastSize() != 0 || req.GetLastRangeAt() != nil
	return echoes && (code == codes.FailedPrecondition || code == codes.InvalidArgument)
}

// The most numbers a client takes in one range (CONTRACT.md R11): a server's
// ranges are at most its --max_range_size (2^20 by default); a bigger one is
// a tampered reply or a broken server, whose high echoed as last_max every
// node would then refuse.
const maxRangeSize = 1 << 32

// checkReply refuses a NextRange reply of collection that breaks the
// contract (CONTRACT.md R11): a node tag that is not 1-4 characters of A-Z
// and 0-9, low < 1, high < low, more than maxRangeSize numbers, a range_at
// that is not a valid Timestamp (unset counts as 1970, which is valid), or
// a range overlapping what held says the client has of that node.
func checkReply(r *hilov1.NextRangeResponse, collection string, held heldNumbers) error {
	if !validTag(r.GetNodeTag()) {
		return fmt.Errorf("NextRange replied with node tag %q, which is not 1-4 characters of A-Z and 0-9",
			r.GetNodeTag())
	}
	if r.GetLow() < 1 || r.GetHigh() < r.GetLow() {
		return fmt.Errorf("NextRange replied with the invalid range [%d, %d]", r.GetLow(), r.GetHigh())
	}
	// high - low cannot overflow: low >= 1.
	if r.GetHigh()-r.GetLow() >= maxRangeSize {
		return fmt.Errorf("NextRange replied with the range [%d, %d] of %d numbers; a client takes at most %d in one range",
			r.GetLow(), r.GetHigh(), uint64(r.GetHigh()-r.GetLow())+1, int64(maxRangeSize))
	}
	if at := r.GetRangeAt(); at != nil && at.CheckValid() != nil {
		return fmt.Errorf("NextRange replied with range_at %d s %d ns, which is not a valid Timestamp (0001-01-01 to 9999-12-31)",
			at.GetSeconds(), at.GetNanos())
	}
	if err := held.check(r.GetNodeTag(), r.GetLow(), r.GetHigh()); err != nil {
		return fmt.Errorf("%w (collection %s)", err, quoteName(collection))
	}
	return nil
}

func validTag(tag string) bool {
	if len(tag) < 1 || len(tag) > 4 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		if b := tag[i]; !(b >= 'A' && b <= 'Z' || b >= '0' && b <= '9') {
			return false
		}
	}
	return true
}

// returnItem hands back (last, r.high] of r.
type returnItem struct {
	collection string
	r          *span
	last       int64
}

func (it returnItem) request() *hilov1.ReturnRangeRequest {
	return &hilov1.ReturnRangeRequest{
		Collection: it.collection,
		End:        it.r.high,
		Last:       it.last,
		NodeTag:    it.r.tag,
		RangeToken: it.r.token,
	}
}

// returnOutcome is a node's judgement of one return, or why there was none.
type returnOutcome struct {
	applied bool
	max     int64
	err     error
}

// returnGroup is returns that go to one node in one call, in order: one
// collection's range fetched ahead (whole) and then its current range's
// tail, so that the node sees the later range come back first.
type returnGroup []returnItem

// returnAll sends every group to the node that issued its ranges, in
// ReturnRanges calls of at most maxBatchItems items and maxBatchBytes
// bytes (a group never split), a few calls at once; to a node that answers
// UNIMPLEMENTED, single ReturnRange calls in the same order. Each call is
// retried on UNAVAILABLE or DEADLINE_EXCEEDED within rpcTimeout (and ctx).
// The outcomes are in the order of the groups' items.
func (s *source) returnAll(ctx context.Context, groups []returnGroup) [][]returnOutcome {
	out := make([][]returnOutcome, len(groups))
	type batch struct {
		target int
		groups []int
		items  int
		bytes  int
	}
	var batches []*batch
	open := make([]*batch, len(s.targets))
	for g, group := range groups {
		out[g] = make([]returnOutcome, len(group))
		if len(group) == 0 {
			continue
		}
		t := group[0].r.target
		size := 0
		for _, it := range group {
			size += proto.Size(it.request()) + 4 // with its field tag and length
		}
		b := open[t]
		if b == nil || b.items+len(group) > maxBatchItems || b.bytes+size > maxBatchBytes {
			b = &batch{target: t}
			open[t] = b
			batches = append(batches, b)
		}
		b.groups = append(b.groups, g)
		b.items += len(group)
		b.bytes += size
	}
	work := make(chan *batch)
	var wg sync.WaitGroup
	for w := 0; w < returnCalls && w < len(batches); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				var items []returnItem
				var lens []int
				for _, g := range b.groups {
					items = append(items, groups[g]...)
					lens = append(lens, len(groups[g]))
				}
				results := s.returnBatch(ctx, s.targets[b.target], items, lens)
				k := 0
				for _, g := range b.groups {
					k += copy(out[g], results[k:])
				}
			}
		}()
	}
	for _, b := range batches {
		work <- b
	}
	close(work)
	wg.Wait()
	return out
}

// returnBatch sends items to t in one ReturnRanges call, or one by one to a
// node without ReturnRanges: the items of a group (lens gives each group's
// length, in order) one after another, several groups at once.
func (s *source) returnBatch(ctx context.Context, t *target, items []returnItem, lens []int) []returnOutcome {
	out := make([]returnOutcome, len(items))
	if !t.noBatches.Load() {
		req := &hilov1.ReturnRangesRequest{Returns: make([]*hilov1.ReturnRangeRequest, len(items))}
		for i, it := range items {
			req.Returns[i] = it.request()
		}
		var resp *hilov1.ReturnRangesResponse
		err := s.withRetries(ctx, t, "ReturnRanges", func(ctx context.Context) (err error) {
			resp, err = t.client.ReturnRanges(ctx, req)
			return err
		})
		if codeOf(err) != codes.Unimplemented {
			for i := range items {
				switch {
				case err != nil:
					out[i].err = err
				case len(resp.GetResults()) != len(items):
					out[i].err = newError(codes.Internal, nil, "%s: ReturnRanges answered %d results for %d returns",
						t.name, len(resp.GetResults()), len(items))
				case resp.Results[i].GetCode() != 0:
					r := resp.Results[i]
					out[i].err = newError(codes.Code(r.GetCode()), nil, "%s: ReturnRanges refused the return of %d-%d of %s: %s",
						t.name, items[i].last+1, items[i].r.high, quoteName(items[i].collection), r.GetMessage())
				default:
					out[i] = returnOutcome{applied: resp.Results[i].GetApplied(), max: resp.Results[i].GetMax()}
				}
			}
			return out
		}
		t.noBatches.Store(true)
	}
	sem := make(chan struct{}, singleReturnCalls)
	var wg sync.WaitGroup
	for first, g := 0, 0; g < len(lens); first, g = first+lens[g], g+1 {
		sem <- struct{}{}
		wg.Add(1)
		go func(group []returnItem, out []returnOutcome) {
			defer func() { <-sem; wg.Done() }()
			for i, it := range group {
				req := it.request()
				var resp *hilov1.ReturnRangeResponse
				err := s.withRetries(ctx, t, "ReturnRange", func(ctx context.Context) (err error) {
					resp, err = t.client.ReturnRange(ctx, req)
					return err
				})
				if err != nil {
					out[i].err = err
				} else {
					out[i] = returnOutcome{applied: resp.GetApplied(), max: resp.GetMax()}
				}
			}
		}(items[first:first+lens[g]], out[first:first+lens[g]])
	}
	wg.Wait()
	return out
}

// withRetries makes call, within rpcTimeout (and ctx) in all, up to
// returnAttempts times while it fails with UNAVAILABLE or DEADLINE_EXCEEDED
// and the next pause still ends before the deadline; each attempt gets an
// equal share of the time left. Safe only for calls that apply at most once
// (returns carrying their range token).
func (s *source) withRetries(ctx context.Context, t *target, method string,
	call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.rpcTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	backoff := returnBackoff
	var failures []string
	for attempt := 1; ; attempt++ {
		share := time.Until(deadline) / time.Duration(returnAttempts-attempt+1)
		actx, acancel := context.WithTimeout(ctx, share)
		err := call(actx)
		acancel()
		if err == nil {
			return nil
		}
		code := status.Code(err)
		failures = append(failures, fmt.Sprintf("%s: %s", code, status.Convert(err).Message()))
		retry := transient(code) && attempt < returnAttempts &&
			time.Until(deadline) > backoff && ctx.Err() == nil
		if !retry {
			if attempt == 1 {
				return newError(code, err, "%s: %s: %s", t.name, method, status.Convert(err).Message())
			}
			return newError(code, err, "%s: %s failed %d times within %s: %s", t.name, method,
				attempt, s.rpcTimeout, strings.Join(failures, "; "))
		}
		if s.sleep(ctx, backoff) != nil {
			return newError(codes.DeadlineExceeded, ctx.Err(), "%s: %s: %s", t.name, method,
				strings.Join(failures, "; "))
		}
		backoff *= 2
	}
}
