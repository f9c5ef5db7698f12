package hilo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// serverProcess is a hilo_server child on 127.0.0.1:0 with a database of
// its own, stopped (and its files removed) when the test ends.
type serverProcess struct {
	cmd    *exec.Cmd
	target string
	exited chan struct{}
}

var servingLine = regexp.MustCompile(`serving node \S+ on port (\d+)`)

// startServer starts $HILO_SERVER_BIN with node tag `tag` and extra flags.
// Without HILO_SERVER_BIN the test is skipped (CTest always sets it).
func startServer(t testing.TB, tag string, flags ...string) *serverProcess {
	t.Helper()
	bin := os.Getenv("HILO_SERVER_BIN")
	if bin == "" {
		t.Skip("HILO_SERVER_BIN is not set")
	}
	dir := t.TempDir()
	args := append([]string{"--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
		"--db=" + filepath.Join(dir, "hilo.db"), "--create_db", "--node_tag=" + tag}, flags...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &serverProcess{cmd: cmd, exited: make(chan struct{})}
	port := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			if m := servingLine.FindStringSubmatch(scanner.Text()); m != nil {
				select {
				case port <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-p.exited
		}
	})
	select {
	case n := <-port:
		p.target = net.JoinHostPort("127.0.0.1", n)
	case <-p.exited:
		t.Fatalf("hilo_server exited before serving")
	case <-time.After(20 * time.Second):
		t.Fatalf("hilo_server did not say which port it serves within 20 s")
	}
	return p
}

// kill9 kills the server outright and waits until it is gone.
func (p *serverProcess) kill9(t *testing.T) {
	t.Helper()
	p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("hilo_server survived kill -9 for 10 s")
	}
}

func newRealClient(t *testing.T, cfg Config, servers ...*serverProcess) *Client {
	t.Helper()
	for _, s := range servers {
		cfg.Targets = append(cfg.Targets, s.target)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close(bg) })
	return c
}

func wantDocumentID(t *testing.T, c *Client, collection, want string) {
	t.Helper()
	got, err := c.NextDocumentID(bg, collection)
	if err != nil || got != want {
		t.Fatalf("NextDocumentID(%q) = %q, %v; want %q", collection, got, err, want)
	}
}

func TestRealServerSeedSequenceAndReturns(t *testing.T) {
	t.Parallel() // each has servers of its own
	srv := startServer(t, "A")
	off := Config{PrefetchAt: PrefetchOff}
	first := newRealClient(t, off, srv)
	for i := 1; i <= 10; i++ {
		wantDocumentID(t, first, "seed", fmt.Sprintf("seed/%d-A", i))
	}
	second := newRealClient(t, off, srv)
	wantDocumentID(t, second, "seed", "seed/33-A")
	// The second client's range is the node's last one: its tail comes
	// back. The first's is refused (normal), and its numbers stay unused.
	if err := second.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := first.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s := second.Stats(); s.ReturnsApplied != 1 {
		t.Fatalf("second client's stats %+v, want 1 return applied", s)
	}
	if s := first.Stats(); s.ReturnsRefused != 1 {
		t.Fatalf("first client's stats %+v, want 1 return refused", s)
	}
	third := newRealClient(t, off, srv)
	wantDocumentID(t, third, "seed", "seed/34-A")
}

func TestRealServerCloseHandsBackTheRangeAheadAndTheTail(t *testing.T) {
	t.Parallel() // each has servers of its own
	srv := startServer(t, "A")
	c := newRealClient(t, Config{}, srv)
	for i := 1; i <= 10; i++ {
		wantDocumentID(t, c, "pair", fmt.Sprintf("pair/%d-A", i))
	}
	eventually(t, "33-96 is fetched ahead", func() bool { return c.Stats().RangesPrefetched == 1 })
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s := c.Stats(); s.ReturnsApplied != 2 || s.ReturnsRefused != 0 || s.ReturnsFailed != 0 {
		t.Fatalf("stats %+v, want both returns applied", s)
	}
	next := newRealClient(t, Config{}, srv)
	wantDocumentID(t, next, "pair", "pair/11-A")
}

func TestRealServerFailoverAfterKill9(t *testing.T) {
	t.Parallel() // each has servers of its own
	a, b := startServer(t, "A"), startServer(t, "B")
	c := newRealClient(t, Config{PrefetchAt: PrefetchOff, RPCTimeout: 2 * time.Second}, a, b)
	wantDocumentID(t, c, "fail", "fail/1-A")
	a.kill9(t)
	for i := 2; i <= 32; i++ {
		wantDocumentID(t, c, "fail", fmt.Sprintf("fail/%d-A", i)) // still A's range
	}
	// B starts above the highest number this client saw.
	wantDocumentID(t, c, "fail", "fail/33-B")
	if s := c.Stats(); s.Failovers != 1 {
		t.Fatalf("stats %+v, want 1 failover", s)
	}
}

func TestRealServersAllDownIsUnavailableNamingEach(t *testing.T) {
	t.Parallel() // each has servers of its own
	a := startServer(t, "A")
	c := newRealClient(t, Config{RPCTimeout: time.Second}, a)
	a.kill9(t)
	_, err := c.NextID(bg, "down")
	wantCode(t, err, codes.Unavailable, a.target)
}

func TestRealServersGoroutinesUnderKill9NoIDTwice(t *testing.T) {
	t.Parallel() // each has servers of its own
	a, b := startServer(t, "A"), startServer(t, "B")
	c := newRealClient(t, Config{RPCTimeout: 2 * time.Second}, a, b)
	const goroutines, each = 10, 2000
	var killOnce sync.Once
	drawAllDistinct(t, goroutines, each, func(g, i int) (string, error) {
		if g == 0 && i == each/4 {
			killOnce.Do(func() { a.kill9(t) })
		}
		return c.NextDocumentID(bg, "many")
	})
}

func TestRealServerDNSTarget(t *testing.T) {
	t.Parallel() // each has servers of its own
	srv := startServer(t, "A")
	c, err := New(Config{Targets: []string{"dns:///" + srv.target}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	wantDocumentID(t, c, "dns", "dns/1-A")
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hilo test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestRealServerOverTLS(t *testing.T) {
	t.Parallel() // each has servers of its own
	cert, key := writeCert(t, t.TempDir())
	srv := startServer(t, "T", "--tls_cert="+cert, "--tls_key="+key)
	creds, err := credentials.NewClientTLSFromFile(cert, "")
	if err != nil {
		t.Fatal(err)
	}
	c := newRealClient(t, Config{TransportCredentials: creds}, srv)
	wantDocumentID(t, c, "tls", "tls/1-T")
	// Plaintext to a TLS port gets no range.
	plain := newRealClient(t, Config{RPCTimeout: time.Second}, srv)
	if _, err := plain.NextID(bg, "tls"); err == nil || errors.Is(err, ErrClosed) {
		t.Fatalf("a plaintext client got %v from a TLS server", err)
	}
}

// TestRealServerGoAndCppClientsNeverCollide draws from one collection with
// the Go client and, at the same time, with the C++ client
// ($HILO_CPP_ID_DUMP, tests/languages/cpp_id_dump), each in rounds of new
// clients that hand their tails back when they close: no ID may be drawn
// twice, within a language or across them.
func TestRealServerGoAndCppClientsNeverCollide(t *testing.T) {
	t.Parallel()
	dump := os.Getenv("HILO_CPP_ID_DUMP")
	if dump == "" {
		t.Skip("HILO_CPP_ID_DUMP is not set")
	}
	srv := startServer(t, "A")
	const rounds, perRound, goroutines = 5, 4000, 4
	cpp := exec.Command(dump, srv.target, "shared", strconv.Itoa(rounds*perRound), "4", strconv.Itoa(rounds))
	var cppOut, cppErr bytes.Buffer
	cpp.Stdout, cpp.Stderr = &cppOut, &cppErr
	if err := cpp.Start(); err != nil {
		t.Fatalf("start %s: %v", dump, err)
	}
	var goIDs []string
	for r := 0; r < rounds; r++ {
		c, err := New(Config{Targets: []string{srv.target}})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perRound/goroutines; i++ {
					id, err := c.NextDocumentID(bg, "shared")
					if err != nil {
						t.Errorf("NextDocumentID: %v", err)
						return
					}
					mu.Lock()
					goIDs = append(goIDs, id)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if err := c.Close(bg); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- cpp.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("cpp_id_dump: %v: %s", err, cppErr.String())
		}
	case <-time.After(60 * time.Second):
		cpp.Process.Kill()
		<-done
		t.Fatal("cpp_id_dump did not finish within 60 s")
	}
	cppIDs := strings.Fields(cppOut.String())
	if len(cppIDs) != rounds*perRound || len(goIDs) != rounds*perRound {
		t.Fatalf("%d C++ and %d Go IDs, want %d each", len(cppIDs), len(goIDs), rounds*perRound)
	}
	owner := map[string]string{}
	for lang, ids := range map[string][]string{"C++": cppIDs, "Go": goIDs} {
		for _, id := range ids {
			if !regexp.MustCompile(`^shared/[1-9][0-9]*-A$`).MatchString(id) {
				t.Fatalf("%s ID %q is malformed", lang, id)
			}
			if other, ok := owner[id]; ok {
				t.Fatalf("%s drawn by %s and by %s", id, other, lang)
			}
			owner[id] = lang
		}
	}
}

// pause sends SIGSTOP to pid and waits (up to 5 s) until every one of its
// threads is stopped: the kernel stops them asynchronously, and a request
// sent at once could still be answered.
func pause(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	tasks := fmt.Sprintf("/proc/%d/task", pid)
	for deadline := time.Now().Add(5 * time.Second); ; {
		entries, err := os.ReadDir(tasks)
		stopped := err == nil && len(entries) > 0
		for _, e := range entries {
			stat, err := os.ReadFile(filepath.Join(tasks, e.Name(), "stat"))
			if err != nil {
				continue // the thread has exited
			}
			i := bytes.LastIndexByte(stat, ')')
			if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'T' && stat[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hilo_server (pid %d) not stopped 5 s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRealServerFailoverWhenANodeIsStopped(t *testing.T) {
	t.Parallel()
	a, b := startServer(t, "A"), startServer(t, "B")
	c := newRealClient(t, Config{PrefetchAt: PrefetchOff, RPCTimeout: 300 * time.Millisecond}, a, b)
	wantDocumentID(t, c, "stop", "stop/1-A")
	pause(t, a.cmd.Process.Pid)
	t.Cleanup(func() { a.cmd.Process.Signal(syscall.SIGCONT) }) // runs before the SIGTERM
	for i := 2; i <= 32; i++ {
		wantDocumentID(t, c, "stop", fmt.Sprintf("stop/%d-A", i))
	}
	// A takes the connection but never answers: DEADLINE_EXCEEDED, then B.
	wantDocumentID(t, c, "stop", "stop/33-B")
	if s := c.Stats(); s.Failovers != 1 {
		t.Fatalf("stats %+v, want 1 failover", s)
	}
}

// A caller naming many collections the server refuses (names taken from its
// own users, say) must not grow the client by one collection each: a
// collection that never received a range is forgotten when its call fails.
// Every failure still counts, and the good collection goes on where it was.
func TestRealServerRefusedNamesAreNotKept(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "A")
	c := newRealClient(t, Config{}, srv)
	wantDocumentID(t, c, "kept", "kept/1-A")
	for i := 0; i < 200; i++ {
		for _, bad := range []string{fmt.Sprintf("bad\x01%d", i), strings.Repeat("x", 257) + strconv.Itoa(i)} {
			_, err := c.NextID(bg, bad)
			wantCode(t, err, codes.InvalidArgument, "NextRange of")
		}
	}
	// Through handles too, each called twice (its second call finds its
	// cache forgotten by the first).
	for i := 0; i < 10; i++ {
		h := c.Collection(fmt.Sprintf("handle\x02%d", i))
		_, err := h.NextDocumentID(bg)
		wantCode(t, err, codes.InvalidArgument, "NextRange of")
		buf, err := h.AppendDocumentID(bg, []byte("x"))
		wantCode(t, err, codes.InvalidArgument, "NextRange of")
		if string(buf) != "x" {
			t.Fatalf("a failed AppendDocumentID changed the buffer to %q", buf)
		}
	}
	wantCollections(t, c, "kept")
	wantErrors(t, c, map[codes.Code]int64{codes.InvalidArgument: 420})
	if s := c.Stats(); s.RangesFetched != 1 || s.CallsWaited != 421 {
		t.Fatalf("stats %+v, want 1 range fetched and 421 calls waited", s)
	}
	wantDocumentID(t, c, "kept", "kept/2-A")
}

// New collections past the server's --max_collections are refused
// (RESOURCE_EXHAUSTED): the client keeps none of them.
func TestRealServerNamesPastMaxCollectionsAreNotKept(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "L", "--max_collections=1")
	c := newRealClient(t, Config{}, srv)
	wantDocumentID(t, c, "first", "first/1-L")
	for i := 0; i < 50; i++ {
		_, err := c.NextID(bg, fmt.Sprintf("new%d", i))
		wantCode(t, err, codes.ResourceExhausted, fmt.Sprintf("NextRange of \"new%d\"", i))
	}
	wantCollections(t, c, "first")
	wantErrors(t, c, map[codes.Code]int64{codes.ResourceExhausted: 50})
	wantDocumentID(t, c, "first", "first/2-L")
}

// Another caller's failure has just forgotten a collection that is still
// in the table (the window between forgetting and dropping it): a caller
// that finds it there looks the collection up again and gets a number. A
// collection that received a range is never forgotten.
func TestRealServerACallerThatFindsAForgottenCollectionLooksAgain(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "A")
	c := newRealClient(t, Config{PrefetchAt: PrefetchOff}, srv)
	_, err := c.NextID(bg, "")
	wantCode(t, err, codes.InvalidArgument, `NextRange of ""`)
	wantCollections(t, c)
	stale := c.cache("late")
	if !stale.forgetIfUnused() {
		t.Fatal("a cache that never fetched was not forgotten")
	}
	wantCollections(t, c, "late")
	wantDocumentID(t, c, "late", "late/1-A")
	wantCollections(t, c, "late")
	fresh := (*c.caches.Load())["late"]
	if fresh == stale {
		t.Fatal("the forgotten cache is still in the table")
	}
	// The same through a handle's first call, which keeps the new cache.
	h := c.Collection("handle")
	if !c.cache("handle").forgetIfUnused() {
		t.Fatal("a cache that never fetched was not forgotten")
	}
	if id, err := h.NextDocumentID(bg); err != nil || id != "handle/1-A" {
		t.Fatalf("handle NextDocumentID = %q, %v; want handle/1-A", id, err)
	}
	if h.rangeCache() != (*c.caches.Load())["handle"] {
		t.Fatal("the handle does not use the collection's new cache")
	}
	// A forgotten cache hands out nothing and fetches nothing.
	if _, err := stale.next(bg, nil); err != errForgotten {
		t.Fatalf("next on a forgotten cache: %v, want errForgotten", err)
	}
	wantErrors(t, c, map[codes.Code]int64{codes.InvalidArgument: 1})
	if s := c.Stats(); s.RangesFetched != 2 {
		t.Fatalf("stats %+v, want 2 ranges fetched", s)
	}
	// One that received a range is never forgotten, not even once it
	// handed its range back and holds none.
	if fresh.forgetIfUnused() {
		t.Fatal("a cache that received a range was forgotten")
	}
	if err := c.ReturnUnusedRanges(bg); err != nil {
		t.Fatalf("ReturnUnusedRanges: %v", err)
	}
	if fresh.forgetIfUnused() {
		t.Fatal("a cache that handed its range back was forgotten")
	}
	wantCollections(t, c, "handle", "late")
	wantDocumentID(t, c, "late", "late/2-A")
}

// Many goroutines on one refused name, directly and through one handle:
// each call fails with the server's error, never with the client's own
// (a caller finding the cache forgotten by another looks again), and the
// client keeps nothing of it. A fetch counts once however many waited.
func TestRealServerGoroutinesOnARefusedNameAllGetTheServersError(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "A")
	c := newRealClient(t, Config{}, srv)
	const bad = "bad\x01shared"
	h := c.Collection(bad)
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				var err error
				if g%2 == 0 {
					_, err = c.NextID(bg, bad)
				} else {
					_, err = h.NextID(bg)
				}
				var e *Error
				if !errors.As(err, &e) || e.Code != codes.InvalidArgument {
					t.Errorf("call %d of goroutine %d: %v, want INVALID_ARGUMENT", i, g, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	wantCollections(t, c)
	s := c.Stats()
	if n := s.Errors[codes.InvalidArgument]; len(s.Errors) != 1 || n < 1 || n > goroutines*each {
		t.Fatalf("errors counted %v, want 1 to %d INVALID_ARGUMENT", s.Errors, goroutines*each)
	}
	wantDocumentID(t, c, "good", "good/1-A")
	wantCollections(t, c, "good")
}

// A name of a million bytes is quoted in part in every message: the error
// stays short, on an open client and on a closed one.
func TestRealServerAHugeNameGivesAShortMessage(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "A")
	c := newRealClient(t, Config{}, srv)
	huge := strings.Repeat("n", 1000000)
	check := func(what string, err error) {
		t.Helper()
		if err == nil || len(err.Error()) >= 400 {
			t.Fatalf("%s: the error is %d bytes, want under 400: %.600s", what, len(err.Error()), err)
		}
	}
	_, err := c.NextID(bg, huge)
	check("NextID", err)
	// The server refuses it (RESOURCE_EXHAUSTED: past its largest request).
	if !strings.Contains(err.Error(), `NextRange of "nnnn`) || !strings.Contains(err.Error(), `nnn"... (1000000 bytes)`) {
		t.Fatalf("the error does not quote the name's start and give its length: %v", err)
	}
	_, err = c.Collection(huge).NextID(bg)
	check("Collection.NextID", err)
	_, err = c.NextID(bg, huge[:999999]+"\xff") // not UTF-8: refused by the client
	check("NextID of a name that is not UTF-8", err)
	wantCode(t, err, codes.InvalidArgument, "is not valid UTF-8")
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err = c.NextID(bg, huge)
	check("NextID after Close", err)
	_, err = c.Collection(huge).NextID(bg)
	check("Collection.NextID after Close", err)
}

// Names first used after Close, by NextID or through a handle (made
// before or after Close), fail with ErrClosed and leave the client's table
// as it was.
func TestRealServerNamesAfterCloseAreNotKept(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "A")
	c := newRealClient(t, Config{}, srv)
	wantDocumentID(t, c, "good", "good/1-A")
	// Made before Close, first called after it.
	before := []*Collection{c.Collection("good"), c.Collection("fresh")}
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, h := range before {
		if _, err := h.NextID(bg); !errors.Is(err, ErrClosed) {
			t.Fatalf("a handle on %q made before Close, first called after: %v, want ErrClosed", h.Name(), err)
		}
	}
	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("after%d", i)
		if _, err := c.Collection(name).NextID(bg); !errors.Is(err, ErrClosed) {
			t.Fatalf("Collection(%q).NextID after Close: %v, want ErrClosed", name, err)
		}
		if _, err := c.NextID(bg, name); !errors.Is(err, ErrClosed) {
			t.Fatalf("NextID(%q) after Close: %v, want ErrClosed", name, err)
		}
	}
	h := c.Collection("good")
	if _, err := h.NextID(bg); !errors.Is(err, ErrClosed) {
		t.Fatalf("Collection(good).NextID after Close: %v, want ErrClosed", err)
	}
	wantCollections(t, c, "good")
}

// Callers whose ctx ended before the fetch of a refused name failed (100
// names, none seen again): the fetch itself forgets each cache, so the
// client keeps only the good collection, each fetch's error counted once.
func TestRealServerRefusedNamesLeftByTheirCallersAreNotKept(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "A")
	c := newRealClient(t, Config{}, srv)
	wantDocumentID(t, c, "good", "good/1-A")
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	const names = 100
	for i := 0; i < names; i++ {
		name := fmt.Sprintf("bad\x01%d", i)
		var err error
		if i%2 == 0 {
			_, err = c.NextID(cancelled, name)
		} else {
			_, err = c.Collection(name).NextID(cancelled)
		}
		var e *Error
		if err != context.Canceled && !(errors.As(err, &e) && e.Code == codes.InvalidArgument) {
			t.Fatalf("NextID(%q) with a cancelled ctx: %v, want context.Canceled or INVALID_ARGUMENT", name, err)
		}
	}
	// Each fetch ends within its deadline; wait for every flight still out
	// (a failed fetch drops its cache before its flight ends).
	for _, rc := range *c.caches.Load() {
		rc.mu.Lock()
		f := rc.flying
		rc.mu.Unlock()
		if f != nil {
			<-f.done
		}
	}
	wantCollections(t, c, "good")
	wantErrors(t, c, map[codes.Code]int64{codes.InvalidArgument: names})
	// The name is refused again, afresh, and the client still keeps nothing.
	_, err := c.NextID(bg, "bad\x010")
	wantCode(t, err, codes.InvalidArgument, `NextRange of "bad\x010"`)
	wantCollections(t, c, "good")
	wantDocumentID(t, c, "good", "good/2-A")
}

// Making a handle keeps nothing in the client: 1,000 handles on distinct
// names, half of them names the server refuses and half valid ones, none
// called, leave the table as it was, while a collection drawn from meanwhile
// goes on as before. The handles work when called later.
func TestRealServerHandlesNeverCalledAreNotKept(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "A")
	c := newRealClient(t, Config{PrefetchAt: PrefetchOff}, srv)
	wantDocumentID(t, c, "kept", "kept/1-A")
	keptHandle := c.Collection("kept")
	handles := make([]*Collection, 0, 1000)
	next := 2
	for i := 0; i < 1000; i++ {
		var name string
		switch i % 4 {
		case 0:
			name = fmt.Sprintf("bad\x01%d", i)
		case 1:
			name = strings.Repeat("x", 257) + strconv.Itoa(i)
		default:
			name = fmt.Sprintf("valid%d", i)
		}
		handles = append(handles, c.Collection(name))
		if i%100 == 99 {
			wantDocumentID(t, c, "kept", fmt.Sprintf("kept/%d-A", next))
			next++
		}
	}
	wantCollections(t, c, "kept")
	wantErrors(t, c, map[codes.Code]int64{})
	if s := c.Stats(); s.RangesFetched != 1 || s.CallsWaited != 1 {
		t.Fatalf("stats %+v, want 1 range fetched and 1 call waited", s)
	}
	if id, err := keptHandle.NextDocumentID(bg); err != nil || id != fmt.Sprintf("kept/%d-A", next) {
		t.Fatalf("the handle on kept: %q, %v; want kept/%d-A", id, err, next)
	}
	_, err := handles[0].NextID(bg)
	wantCode(t, err, codes.InvalidArgument, `NextRange of "bad\x010"`)
	_, err = handles[1].NextID(bg)
	wantCode(t, err, codes.InvalidArgument, "NextRange of")
	if id, err := handles[2].NextDocumentID(bg); err != nil || id != "valid2/1-A" {
		t.Fatalf("a handle first called after 999 others were made: %q, %v; want valid2/1-A", id, err)
	}
	wantCollections(t, c, "kept", "valid2")
	wantErrors(t, c, map[codes.Code]int64{codes.InvalidArgument: 2})
}

// A handle made and then called gets exactly the numbers a fresh client
// would (1, 2, ... on a fresh server): its first call puts the collection's
// cache in the table, and the handle draws from that cache from then on, as
// do NextID and a second handle. Each call counts once: one waited, for the
// one range fetched.
func TestRealServerAHandleLooksItsCollectionUpOnItsFirstCall(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "A")
	c := newRealClient(t, Config{PrefetchAt: PrefetchOff}, srv)
	h := c.Collection("orders")
	wantCollections(t, c)
	if id, err := h.NextID(bg); err != nil || id != (ID{1, "A"}) {
		t.Fatalf("the handle's first NextID: %+v, %v; want 1 of A", id, err)
	}
	wantCollections(t, c, "orders")
	rc := (*c.caches.Load())["orders"]
	if h.rangeCache() != rc {
		t.Fatal("after its first call the handle does not hold the collection's cache")
	}
	if id, err := h.NextDocumentID(bg); err != nil || id != "orders/2-A" {
		t.Fatalf("handle NextDocumentID: %q, %v; want orders/2-A", id, err)
	}
	if buf, err := h.AppendDocumentID(bg, nil); err != nil || string(buf) != "orders/3-A" {
		t.Fatalf("handle AppendDocumentID: %q, %v; want orders/3-A", buf, err)
	}
	wantDocumentID(t, c, "orders", "orders/4-A")
	h2 := c.Collection("orders")
	if id, err := h2.NextID(bg); err != nil || id != (ID{5, "A"}) {
		t.Fatalf("a second handle's first NextID: %+v, %v; want 5 of A", id, err)
	}
	if h2.rangeCache() != rc || (*c.caches.Load())["orders"] != rc {
		t.Fatal("the second handle does not share the collection's cache")
	}
	wantCollections(t, c, "orders")
	if s := c.Stats(); s.RangesFetched != 1 || s.CallsWaited != 1 || len(s.Errors) != 0 {
		t.Fatalf("stats %+v, want 1 range fetched, 1 call waited and no error", s)
	}
}

// Handles on a collection the client does not hold yet, made at once and
// first called at once from 16 goroutines, share one cache, the one the
// table holds: the numbers drawn are 1 to 800, each once (one client, no
// prefetch, nothing returned: each range is used up before the next). A
// handle made while the client holds the collection starts on its cache.
func TestRealServerHandlesFirstCalledAtOnceShareOneCache(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "A")
	c := newRealClient(t, Config{PrefetchAt: PrefetchOff}, srv)
	const goroutines, each = 16, 50
	handles := make([]*Collection, goroutines)
	for g := range handles {
		handles[g] = c.Collection("orders")
	}
	var mu sync.Mutex
	var numbers []int64
	drawAllDistinct(t, goroutines, each, func(g, i int) (ID, error) {
		id, err := handles[g].NextID(bg)
		mu.Lock()
		numbers = append(numbers, id.Number)
		mu.Unlock()
		return id, err
	})
	sort.Slice(numbers, func(i, j int) bool { return numbers[i] < numbers[j] })
	for i, n := range numbers {
		if n != int64(i+1) {
			t.Fatalf("the %dth smallest number drawn is %d, want %d", i+1, n, i+1)
		}
	}
	wantCollections(t, c, "orders")
	rc := (*c.caches.Load())["orders"]
	for g, h := range handles {
		if h.rangeCache() != rc {
			t.Fatalf("handle %d does not hold the table's cache", g)
		}
	}
	if c.Collection("orders").rangeCache() != rc {
		t.Fatal("a handle made while the client holds the collection does not start on its cache")
	}
	if c.Collection("other").rangeCache() != noCacheYet {
		t.Fatal("a handle on a collection not held starts on a cache")
	}
	wantCollections(t, c, "orders")
}
