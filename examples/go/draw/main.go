// Command draw takes document IDs from hilo with the Go client, for
// scripts/hilo-draw:
//
//	draw --targets=HOST:PORT[,HOST:PORT...] --collection=NAME --threads=N --seconds=S
//
// N goroutines take document IDs of NAME for S seconds and print each on a
// line of its own to stdout. UNAVAILABLE (every target down for a moment)
// is waited out: the goroutine tries again until S is over. Any other error
// while drawing stops the draw: one line on stderr naming it, exit 1. Then
// the client closes, handing its unused numbers back. A return that fails
// is printed to stderr; it makes the exit status 1 only when it failed for
// a reason other than its node being down (UNAVAILABLE, or
// DEADLINE_EXCEEDED: killed, stopped or restarting), since numbers a down
// node does not get back are only skipped. Otherwise draw exits 0. Build it
// with examples/go/draw/build.sh.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	hilo "github.com/hilo-id/hilo/clients/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func main() {
	targets := flag.String("targets", "127.0.0.1:50051", "hilo servers, comma-separated")
	collection := flag.String("collection", "", "collection to draw from")
	threads := flag.Int("threads", 1, "goroutines drawing at once")
	seconds := flag.Float64("seconds", 1, "how long to draw")
	flag.Parse()
	if *collection == "" || *threads < 1 || *seconds <= 0 || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: draw --targets=HOST:PORT,... --collection=NAME --threads=N --seconds=S")
		os.Exit(2)
	}
	if err := run(strings.Split(*targets, ","), *collection, *threads,
		time.Duration(*seconds*float64(time.Second))); err != nil {
		fmt.Fprintf(os.Stderr, "draw: %v\n", err)
		os.Exit(1)
	}
}

// waitOut says whether an error of a draw is waited out (the goroutine
// tries again) rather than ending the draw: only UNAVAILABLE, which the
// client answers when no target answered.
func waitOut(err error) bool {
	return status.Code(err) == codes.Unavailable
}

// nodeDown says whether a return failed because its node was down:
// UNAVAILABLE (killed, not listening) or DEADLINE_EXCEEDED (stopped, or
// not answering yet after a restart).
func nodeDown(code codes.Code) bool {
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}

// closeErrors reads what went wrong during Close from the client's stats
// before and after it: nil when every failure (a return, or a fetch still
// under way when Close began) failed because its node was down; otherwise
// an error counting the others by code.
func closeErrors(before, after hilo.Stats) error {
	var other []string
	for code, n := range after.Errors {
		if d := n - before.Errors[code]; d > 0 && !nodeDown(code) {
			other = append(other, fmt.Sprintf("%d %s", d, code))
		}
	}
	if len(other) == 0 {
		return nil
	}
	sort.Strings(other)
	return fmt.Errorf("handing unused numbers back failed for a reason other than a node being down: %s",
		strings.Join(other, ", "))
}

func run(targets []string, collection string, threads int, length time.Duration) error {
	client, err := hilo.New(hilo.Config{Targets: targets, RPCTimeout: time.Second})
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	var outMu sync.Mutex
	ctx, stop := context.WithTimeout(context.Background(), length)
	defer stop()
	orders := client.Collection(collection)
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lines []byte
			flush := func() {
				outMu.Lock()
				out.Write(lines) // an error sticks to out: Flush reports it
				outMu.Unlock()
				lines = lines[:0]
			}
			defer flush()
			for ctx.Err() == nil {
				var err error
				lines, err = orders.AppendDocumentID(ctx, lines)
				if err != nil {
					if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
						return // time is up (or the draw stopped) while waiting for a range
					}
					if waitOut(err) {
						time.Sleep(10 * time.Millisecond) // every target down: keep trying
						continue
					}
					errOnce.Do(func() { firstErr = err; stop() })
					return
				}
				lines = append(lines, '\n')
				if len(lines) >= 32<<10 {
					flush()
				}
			}
		}()
	}
	wg.Wait()
	before := client.Stats()
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closeErr := client.Close(closeCtx)
	after := client.Stats()
	if closeErr != nil {
		fmt.Fprintf(os.Stderr, "draw: close: %v\n", closeErr)
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("writing IDs to stdout: %w", err)
	}
	if firstErr != nil {
		return fmt.Errorf("drawing from %q failed: %w", collection, firstErr)
	}
	if closeErr != nil && errors.Is(closeErr, closeCtx.Err()) {
		return fmt.Errorf("close: returns not answered within 30 s: %w", closeErr)
	}
	return closeErrors(before, after)
}
