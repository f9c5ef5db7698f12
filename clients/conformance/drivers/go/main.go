// Command driver holds one Go hilo client and does what the conformance
// runner asks, one JSON object per line on stdin, one answer per line on
// stdout (clients/conformance/PROTOCOL.md). Logs go to stderr.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	hilo "github.com/hilo-id/hilo/clients/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/resolver"
)

type request struct {
	Op            string   `json:"op"`
	ID            *string  `json:"id"`
	Targets       []string `json:"targets"`
	Separator     *string  `json:"separator"`
	PrefetchAt    *float64 `json:"prefetch_at"`
	RPCDeadlineMS *int64   `json:"rpc_deadline_ms"`
	CAFile        string   `json:"ca_file"`
	Collection    string   `json:"collection"`
	Callers       int      `json:"callers"`
	Count         *int     `json:"count"`
	Millis        *int64   `json:"millis"`
	KeepGoing     bool     `json:"keep_going"`
	KeepOpen      bool     `json:"keep_open"`
}

type answer map[string]interface{}

// codeName is the canonical name of a gRPC code ("UNAVAILABLE").
var codeName = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL",
	codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

func nameOf(err error) string {
	var e *hilo.Error
	switch {
	case errors.As(err, &e):
		if n, ok := codeName[e.Code]; ok {
			return n
		}
		return "UNKNOWN"
	case errors.Is(err, context.DeadlineExceeded):
		return "DEADLINE_EXCEEDED"
	case errors.Is(err, context.Canceled):
		return "CANCELLED"
	}
	return "UNKNOWN"
}

func failure(err error) answer {
	return answer{"ok": false, "code": nameOf(err), "message": err.Error()}
}

func driverError(format string, args ...interface{}) answer {
	return answer{"ok": false, "code": "DRIVER", "message": fmt.Sprintf(format, args...)}
}

// addressList resolves "ipv4:///host:port,host:port,...", the runner's
// target of several addresses (gRPC's ipv4: URI, which grpc-go does not
// know; it parses a scheme only before "://"), to those addresses in that
// order, once, as a DNS name of several A records or a headless Service
// resolves: the channel's load-balancing policy, which the client
// chooses, then decides which address a call goes to.
type addressList struct{}

func (addressList) Scheme() string { return "ipv4" }

func (addressList) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	var state resolver.State
	for _, a := range strings.Split(t.Endpoint, ",") {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
	}
	cc.UpdateState(state)
	return addressList{}, nil
}

func (addressList) ResolveNow(resolver.ResolveNowOptions) {}
func (addressList) Close()                                {}

type driver struct {
	client *hilo.Client
}

func (d *driver) closeClient() {
	if d.client == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.client.Close(ctx); err != nil && !errors.Is(err, hilo.ErrClosed) {
		log.Printf("driver: close: %v", err)
	}
}

func (d *driver) open(req *request) answer {
	d.closeClient()
	d.client = nil
	cfg := hilo.Config{Targets: append([]string(nil), req.Targets...)}
	for i, t := range cfg.Targets {
		if strings.HasPrefix(t, "ipv4:") && !strings.HasPrefix(t, "ipv4://") {
			cfg.Targets[i] = "ipv4:///" + strings.TrimPrefix(t, "ipv4:")
			cfg.DialOptions = []grpc.DialOption{grpc.WithResolvers(addressList{})}
		}
	}
	if req.Separator != nil {
		r, size := utf8.DecodeRuneInString(*req.Separator)
		if size == 0 || size != len(*req.Separator) {
			return driverError("separator %q is not one character", *req.Separator)
		}
		cfg.Separator = r
		if r == 0 {
			return driverError("separator is NUL")
		}
	}
	if req.PrefetchAt != nil {
		cfg.PrefetchAt = *req.PrefetchAt
		if *req.PrefetchAt == 0 {
			cfg.PrefetchAt = hilo.PrefetchOff
		}
	}
	if req.RPCDeadlineMS != nil {
		if *req.RPCDeadlineMS <= 0 {
			// Config's zero would mean the default; the protocol's is a
			// deadline of nothing, which no client can keep.
			return answer{"ok": false, "code": "INVALID_ARGUMENT",
				"message": fmt.Sprintf("rpc_deadline_ms is %d; it must be positive", *req.RPCDeadlineMS)}
		}
		cfg.RPCTimeout = time.Duration(*req.RPCDeadlineMS) * time.Millisecond
	}
	if req.CAFile != "" {
		creds, err := credentials.NewClientTLSFromFile(req.CAFile, "")
		if err != nil {
			return driverError("ca_file %s: %v", req.CAFile, err)
		}
		cfg.TransportCredentials = creds
	}
	c, err := hilo.New(cfg)
	if err != nil {
		return failure(err)
	}
	d.client = c
	return answer{"ok": true}
}

func (d *driver) draw(req *request) answer {
	if req.Callers < 1 || (req.Count == nil) == (req.Millis == nil) {
		return driverError("draw needs callers >= 1 and exactly one of count and millis")
	}
	var deadline time.Time
	if req.Millis != nil {
		deadline = time.Now().Add(time.Duration(*req.Millis) * time.Millisecond)
	}
	h := d.client.Collection(req.Collection)
	var mu sync.Mutex
	ids := []string{}
	errs := map[string]int{}
	var wg sync.WaitGroup
	for i := 0; i < req.Callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []string
			mineErrs := map[string]int{}
			for n := 0; ; n++ {
				if req.Count != nil && n >= *req.Count || req.Millis != nil && !time.Now().Before(deadline) {
					break
				}
				id, err := h.NextDocumentID(context.Background())
				if err != nil {
					mineErrs[nameOf(err)]++
					if !req.KeepGoing {
						break
					}
					time.Sleep(time.Millisecond) // no hot spin while every node is down
					continue
				}
				mine = append(mine, id)
			}
			mu.Lock()
			ids = append(ids, mine...)
			for k, v := range mineErrs {
				errs[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return answer{"ok": true, "document_ids": ids, "errors": errs}
}

func (d *driver) handle(line []byte) (answer, bool) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return driverError("cannot parse request: %v", err), false
	}
	if req.Op == "exit" {
		d.closeClient()
		return answer{"ok": true}, true
	}
	if req.Op == "open" {
		return d.open(&req), false
	}
	if d.client == nil {
		return driverError("%q before open", req.Op), false
	}
	ctx := context.Background()
	switch req.Op {
	case "next_id":
		id, err := d.client.NextID(ctx, req.Collection)
		if err != nil {
			return failure(err), false
		}
		return answer{"ok": true, "number": strconv.FormatInt(id.Number, 10), "tag": id.NodeTag}, false
	case "next_document_id":
		id, err := d.client.NextDocumentID(ctx, req.Collection)
		if err != nil {
			return failure(err), false
		}
		return answer{"ok": true, "document_id": id}, false
	case "draw":
		return d.draw(&req), false
	case "fork":
		// A Go program does not fork (the runtime's threads do not survive
		// it); os/exec starts a fresh process instead.
		return answer{"ok": true, "forked": false}, false
	case "stats":
		s := d.client.Stats()
		str := func(n int64) string { return strconv.FormatInt(n, 10) }
		return answer{"ok": true, "stats": map[string]string{
			"calls_waited": str(s.CallsWaited), "ranges_fetched": str(s.RangesFetched),
			"ranges_prefetched": str(s.RangesPrefetched), "failovers": str(s.Failovers),
			"returns_applied": str(s.ReturnsApplied), "returns_refused": str(s.ReturnsRefused),
			"returns_failed": str(s.ReturnsFailed),
		}}, false
	case "close":
		if req.KeepOpen {
			// Hands every unused range back; the client stays usable.
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := d.client.ReturnUnusedRanges(ctx); err != nil {
				return failure(err), false
			}
			return answer{"ok": true, "kept_open": true}, false
		}
		d.closeClient()
		return answer{"ok": true}, false
	}
	return driverError("unknown op %q", req.Op), false
}

func main() {
	log.SetFlags(0)
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	var outMu sync.Mutex // one answer line at a time
	write := func(a answer) {
		outMu.Lock()
		defer outMu.Unlock()
		if encErr := enc.Encode(a); encErr != nil {
			log.Fatalf("driver: write answer: %v", encErr)
		}
		out.Flush()
	}
	// Requests that carry an "id" are answered from goroutines of their
	// own while the next requests are read (PROTOCOL.md).
	var inFlight sync.WaitGroup
	d := &driver{}
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var head struct {
				ID *string `json:"id"`
			}
			if json.Unmarshal(line, &head) == nil && head.ID != nil {
				inFlight.Add(1)
				go func(line []byte, id string) {
					defer inFlight.Done()
					a, _ := d.handle(line)
					a["id"] = id
					write(a)
				}(line, *head.ID)
				continue
			}
			a, exit := d.handle(line)
			write(a)
			if exit {
				inFlight.Wait()
				return
			}
		}
		if err != nil {
			inFlight.Wait()
			d.closeClient()
			return
		}
	}
}
