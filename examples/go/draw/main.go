// Command draw takes document IDs from hilo with the Go client, for
// scripts/hilo-draw:
//
//	draw --targets=HOST:PORT[,HOST:PORT...] --collection=NAME --threads=N --seconds=S
//
// N goroutines take document IDs of NAME for S seconds and print each on a
// line of its own to stdout. UNAVAILABLE and DEADLINE_EXCEEDED (a node down
// or stopped) are waited out: the goroutine tries again until S is over.
// Then the client closes, handing its unused numbers back, and draw exits 0.
// Any other error: one line on stderr naming it, exit 1. Build it with
// examples/go/draw/build.sh.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
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
				out.Write(lines)
				outMu.Unlock()
				lines = lines[:0]
			}
			defer flush()
			for ctx.Err() == nil {
				var err error
				lines, err = orders.AppendDocumentID(ctx, lines)
				if err != nil {
					if ctx.Err() != nil {
						return // time is up while waiting for a range
					}
					if c := status.Code(err); c == codes.Unavailable || c == codes.DeadlineExceeded {
						time.Sleep(10 * time.Millisecond) // a node is down: keep trying
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
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closeErr := client.Close(closeCtx)
	if err := out.Flush(); err != nil {
		return fmt.Errorf("writing IDs to stdout: %w", err)
	}
	if firstErr != nil {
		return firstErr
	}
	if closeErr != nil && !errors.Is(closeErr, hilo.ErrClosed) {
		// Returns that failed (the node that issued a range is down) are
		// no error of the draw: the IDs drawn are good, and numbers not
		// handed back are only skipped.
		fmt.Fprintf(os.Stderr, "draw: close: %v\n", closeErr)
	}
	return nil
}
