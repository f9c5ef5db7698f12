package hilo

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run if goroutines are left behind once every test
// has cleaned up: a fetch or a return still running, a connection Close
// did not close, a server a test did not stop.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to `wait` for every goroutine but this one
// (and the runtime's own) to end, and returns the stacks of those that
// did not.
func leakedGoroutines(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		var left []string
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i == 0 || strings.TrimSpace(g) == "" {
				continue // the first is this goroutine
			}
			if strings.Contains(g, "os/signal.signal_recv") || strings.Contains(g, "runtime.ensureSigM") {
				continue
			}
			left = append(left, g)
		}
		if len(left) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(left, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
