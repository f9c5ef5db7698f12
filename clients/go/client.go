// Package hilo is the Go client of a hilo ID service: document IDs such as
// "orders/10-A", without a round trip per ID.
//
// The client keeps one range of numbers per collection, obtained from a hilo
// server with NextRange, and hands its numbers out locally. Each number
// keeps the tag of the node that issued its range, so IDs stay unique
// across nodes:
//
//	client, err := hilo.New(hilo.Config{Targets: []string{"hilo-0.hilo:50051", "hilo-1.hilo:50051"}})
//	if err != nil { ... }
//	defer client.Close(context.Background()) // hands unused numbers back
//	id, err := client.NextDocumentID(ctx, "orders") // "orders/1-A"
//
// A Client is safe for concurrent use by many goroutines. While a range
// lasts, NextID is an atomic load and one atomic add, with no lock. When a
// fifth of a range is used the next one is fetched in the background, so
// callers rarely wait; if a range runs dry first, exactly one NextRange is
// sent and the other callers of that collection wait for it. Ranges grow
// while a collection is busy (each request reports the previous range) and
// never move down. Close hands the numbers the client did not use back, so
// the next client continues right after the last number this one handed out.
package hilo

import (
	"context"
	"fmt"
	"log"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	hilov1 "github.com/hilo-id/hilo/gen/go/hilo/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// Defaults of Config's zero fields.
const (
	DefaultSeparator  = '/'
	DefaultRPCTimeout = 5 * time.Second
	DefaultPrefetchAt = 0.2
)

// PrefetchOff as Config.PrefetchAt turns prefetching off.
const PrefetchOff = -1.0

// Config says how a Client reaches its servers and builds IDs. The zero
// value of each field but Targets means its default; New checks the rest.
type Config struct {
	// Server addresses in gRPC target syntax ("host:port",
	// "dns:///name:port"; of a dns:/// name's addresses, one is used at a time,
	// the next only when it fails).
	// At least one. On UNAVAILABLE or DEADLINE_EXCEEDED the client tries
	// the next, and stays with the one that answered. A reply that breaks
	// the contract (a node tag that is not 1-4 characters of A-Z and 0-9, a
	// range below 1 or upside down, a range overlapping numbers the client
	// holds or handed out from the same node) is never used: that target is
	// skipped the same way.
	Targets []string

	// Between collection and number in a document ID; DefaultSeparator if
	// zero. Never '|' (reserved), a digit 0-9 (it would read as part of
	// the number, so two IDs could be equal) nor '-' (an ID's number is
	// the digits between the last separator and the last '-', which would
	// be the same character).
	Separator rune

	// Deadline of each NextRange attempt (each target is one attempt), and
	// of each return with all its retries; DefaultRPCTimeout if zero.
	RPCTimeout time.Duration

	// Share of a range used before the next one is fetched in the
	// background, in (0, 1); DefaultPrefetchAt if zero, PrefetchOff turns
	// prefetching off.
	PrefetchAt float64

	// Credentials for every target (credentials.NewTLS, or
	// credentials.NewClientTLSFromFile); nil means plaintext.
	TransportCredentials credentials.TransportCredentials

	// More options for every connection the client dials.
	DialOptions []grpc.DialOption

	// Where best-effort failures go (a return that still failed after its
	// retries), one line per call, never from two goroutines at once; nil
	// means the standard logger. A refused return is normal and not logged.
	Logf func(format string, args ...interface{})
}

// ID is one number and the tag of the node whose range it came from.
type ID struct {
	Number  int64
	NodeTag string
}

// Stats counts what a Client did since it was created; each counter only
// grows. They move only where a range is fetched or returned, never on
// NextID's fast path.
type Stats struct {
	// ID requests that waited for a range from a server (or for that
	// fetch's error), rather than taking a cached number.
	CallsWaited int64
	// Ranges a server issued to this client, prefetched or not.
	RangesFetched int64
	// Of RangesFetched, those fetched ahead of need.
	RangesPrefetched int64
	// Fetches another target answered because the preferred one failed.
	Failovers int64
	// Ranges handed back on Close: applied, refused by the node (it issued
	// a newer range meanwhile; normal), or failed after the retries.
	ReturnsApplied, ReturnsRefused, ReturnsFailed int64
	// Failed fetches and returns by the code they failed with; a fetch
	// counts once however many callers waited for it.
	Errors map[codes.Code]int64
	// Not a counter: per collection, how long the numbers the client holds
	// (the rest of its current range and a range fetched ahead) last at the
	// rate it handed them out since its previous range began (CONTRACT.md
	// R14). The server sizes ranges so that a collection in steady use
	// still holds its --range_runway (30 s) when it asks for the next one.
	// Collections holding no numbers, or that handed none out yet, are
	// absent.
	Runway map[string]time.Duration
}

type counters struct {
	callsWaited, rangesFetched, rangesPrefetched  atomic.Int64
	returnsApplied, returnsRefused, returnsFailed atomic.Int64
	errors                                        [codes.Unauthenticated + 1]atomic.Int64
}

func (c *counters) countError(code codes.Code) {
	if int(code) >= len(c.errors) || code == codes.OK {
		code = codes.Unknown
	}
	c.errors[code].Add(1)
}

// Client hands out IDs; see the package documentation. Safe for concurrent
// use by many goroutines.
type Client struct {
	src       *source
	separator rune
	settings  *cacheSettings     // shared by every cache
	conns     []*grpc.ClientConn // dialed by New; closed by Close

	// Collection name -> its cache: read without a lock on every call,
	// replaced by a copy with one more entry (under createMu) when a
	// collection is first used, or one fewer when a collection that never
	// received a range is forgotten after a failed call (drop). A Go map
	// with string keys is found faster than a sync.Map entry, and
	// collections are few and long-lived.
	caches   atomic.Pointer[map[string]*rangeCache]
	createMu sync.Mutex

	closed  atomic.Bool
	closeMu sync.Mutex // one Close or ReturnUnusedRanges at a time
	logMu   sync.Mutex
	stats   counters
}

// New checks cfg and dials every target. Connecting is lazy, so New
// succeeds with no server running. Errors: INVALID_ARGUMENT naming the bad
// field.
func New(cfg Config) (*Client, error) {
	if err := checkConfig(&cfg); err != nil {
		return nil, err
	}
	if len(cfg.Targets) == 0 {
		return nil, newError(codes.InvalidArgument, nil, "Config.Targets is empty; give at least one server")
	}
	opts := []grpc.DialOption{
		// One address of a target at a time (a DNS name or a headless
		// Service may resolve to several nodes): round robin made ranges
		// alternate between nodes and sent returns down whichever
		// connection came next, where the other node refused them.
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pick_first": {}}]}`),
		// An ID service sits under every insert: come back within a second
		// of a server's return rather than after gRPC's default of up to
		// two minutes. Each connection attempt may take as long as a call:
		// left at zero, MinConnectTimeout would cut an attempt at the
		// backoff's current step (about 100 ms at first), so a TLS
		// handshake under load or a long round trip would fail the first
		// calls with UNAVAILABLE.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
			},
			MinConnectTimeout: cfg.RPCTimeout,
		}),
	}
	if cfg.TransportCredentials != nil {
		opts = append(opts, grpc.WithTransportCredentials(cfg.TransportCredentials))
	} else {
		opts = append(opts, grpc.WithInsecure())
	}
	opts = append(opts, cfg.DialOptions...)
	clients := make([]hilov1.HiLoClient, len(cfg.Targets))
	conns := make([]*grpc.ClientConn, 0, len(cfg.Targets))
	for i, t := range cfg.Targets {
		if t == "" {
			return nil, newError(codes.InvalidArgument, nil, "Config.Targets[%d] is empty", i)
		}
		conn, err := grpc.Dial(t, opts...)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, newError(codes.InvalidArgument, err, "cannot dial target %q: %v", t, err)
		}
		conns = append(conns, conn)
		clients[i] = hilov1.NewHiLoClient(conn)
	}
	c := newClient(cfg, clients)
	c.conns = conns
	return c, nil
}

// NewFromClients is New with connections the caller made and owns (an
// in-process server in a test, a connection with its own interceptors):
// clients[i] stands for target i. cfg.Targets, if given, names them in
// messages and must be as many; otherwise they are "target 0", "target 1",
// and so on. Close does not close the connections.
func NewFromClients(cfg Config, clients ...hilov1.HiLoClient) (*Client, error) {
	if err := checkConfig(&cfg); err != nil {
		return nil, err
	}
	if len(clients) == 0 {
		return nil, newError(codes.InvalidArgument, nil, "no clients given; give at least one")
	}
	if len(cfg.Targets) == 0 {
		for i := range clients {
			cfg.Targets = append(cfg.Targets, fmt.Sprintf("target %d", i))
		}
	}
	if len(cfg.Targets) != len(clients) {
		return nil, newError(codes.InvalidArgument, nil, "Config.Targets names %d targets for %d clients",
			len(cfg.Targets), len(clients))
	}
	return newClient(cfg, clients), nil
}

// checkConfig fills in defaults and refuses what cannot work.
func checkConfig(cfg *Config) error {
	if cfg.Separator == 0 {
		cfg.Separator = DefaultSeparator
	}
	switch sep := cfg.Separator; {
	case sep == '|':
		return newError(codes.InvalidArgument, nil,
			"separator '|' is reserved; use any other character but a digit or '-'")
	case sep >= '0' && sep <= '9':
		return newError(codes.InvalidArgument, nil,
			"separator %q is a digit; a digit can be read as part of the number, so two IDs could be equal", sep)
	case sep == '-':
		return newError(codes.InvalidArgument, nil,
			"separator '-' is the character that ends the number; the number of an ID is the digits "+
				"between the last separator and the last '-', which would then be the same character, "+
				"so the number could not be read back")
	case !utf8.ValidRune(sep):
		return newError(codes.InvalidArgument, nil, "separator %U is not a valid character", sep)
	case sep < 0x20 || sep >= 0x7f && sep <= 0x9f:
		// (The zero rune is DefaultSeparator, above: Go cannot ask for NUL.)
		return newError(codes.InvalidArgument, nil,
			"separator %U is a control character; a document ID holds none (a NUL would cut it short in "+
				"C strings and many stores); use any other character but '|', a digit or '-'", sep)
	}
	if cfg.RPCTimeout == 0 {
		cfg.RPCTimeout = DefaultRPCTimeout
	}
	if cfg.RPCTimeout < 0 {
		return newError(codes.InvalidArgument, nil, "RPCTimeout is %s; it must be positive", cfg.RPCTimeout)
	}
	switch p := cfg.PrefetchAt; {
	case p == 0:
		cfg.PrefetchAt = DefaultPrefetchAt
	case p == PrefetchOff:
		cfg.PrefetchAt = 0
	case !(p > 0 && p < 1):
		return newError(codes.InvalidArgument, nil, "PrefetchAt is %v; use a share in (0, 1), or PrefetchOff", p)
	}
	return nil
}

func newClient(cfg Config, clients []hilov1.HiLoClient) *Client {
	src := &source{rpcTimeout: cfg.RPCTimeout, sleep: sleepCtx}
	for i, hc := range clients {
		src.targets = append(src.targets, &target{name: cfg.Targets[i], client: hc})
	}
	logf := cfg.Logf
	if logf == nil {
		logf = log.Printf
	}
	c := &Client{src: src, separator: cfg.Separator}
	c.settings = &cacheSettings{
		prefetchAt: cfg.PrefetchAt,
		// The longest a fetch can take: every target's deadline.
		fetchBound: time.Duration(len(clients)+1) * cfg.RPCTimeout,
		now:        time.Now, // times the runway; tests replace it
		logf: func(format string, args ...interface{}) {
			c.logMu.Lock()
			defer c.logMu.Unlock()
			logf(format, args...)
		},
		stats: &c.stats,
		drop:  func(rc *rangeCache) { c.drop(rc.name, rc) },
	}
	c.caches.Store(&map[string]*rangeCache{})
	return c
}

func (c *Client) cache(collection string) *rangeCache {
	if rc := (*c.caches.Load())[collection]; rc != nil {
		return rc
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	old := *c.caches.Load()
	if rc := old[collection]; rc != nil {
		return rc
	}
	if c.closed.Load() {
		// After Close (which sets closed before it takes createMu, so its
		// list holds every cache stored before): a closed cache, not
		// stored, so that names first used after Close do not pile up.
		return newRangeCache(collection, c.src, c.settings, true)
	}
	caches := make(map[string]*rangeCache, len(old)+1)
	for k, v := range old {
		caches[k] = v
	}
	rc := newRangeCache(collection, c.src, c.settings, false)
	caches[collection] = rc
	c.caches.Store(&caches)
	return rc
}

// drop removes rc, which forgetIfUnused or its failed fetch (launch)
// closed, from the table if it is still there (whoever comes first; the
// others find it gone). Nothing else moves: its counters are the client's
// already, and it holds no range.
func (c *Client) drop(collection string, rc *rangeCache) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	old := *c.caches.Load()
	if old[collection] != rc {
		return
	}
	caches := make(map[string]*rangeCache, len(old)-1)
	for k, v := range old {
		if k != collection {
			caches[k] = v
		}
	}
	c.caches.Store(&caches)
}

// nextSlow is NextID past its fast path: rc (found in the table, or a
// handle's) failed with err, or, with rc nil, the collection has no cache
// yet. A cache that failed and never received a range is forgotten and
// dropped, so that names the server refuses do not pile up (CONTRACT.md
// R13, R19); a caller that finds its cache forgotten by another drops it
// too and looks the collection up again. It returns the cache it ended
// with, for a handle to keep.
func (c *Client) nextSlow(ctx context.Context, collection string, rc *rangeCache, err error) (ID, *rangeCache, error) {
	for {
		if rc != nil {
			if err != errForgotten {
				if rc.forgetIfUnused() {
					c.drop(collection, rc)
				}
				return ID{}, rc, err
			}
			c.drop(collection, rc)
		}
		if c.closed.Load() {
			return ID{}, rc, ErrClosed
		}
		rc = c.cache(collection)
		var id ID
		if id, err = rc.next(ctx, nil); err == nil {
			return id, rc, nil
		}
	}
}

// failed makes the client the caller of its caches' next (see caller).
func (c *Client) failed(ctx context.Context, rc *rangeCache, err error) (ID, error) {
	id, _, err := c.nextSlow(ctx, rc.name, rc, err)
	return id, err
}

// NextID returns the next number of collection and the tag of the node
// whose range it came from. A cached number is returned at once; ctx
// bounds only the wait for a range from a server (returned as ctx.Err()
// when it ends first).
//
// Errors (*Error): INVALID_ARGUMENT for a bad collection name (from the
// server); UNAVAILABLE, naming every target, when no server answered within
// its deadline; INTERNAL, naming every target, when a server replied with a
// range that breaks the contract and no other gave a usable one;
// FAILED_PRECONDITION (ErrClosed) after Close; otherwise the server's code.
// A caller that waited for another caller's fetch gets that fetch's error.
// A collection that never received a range is forgotten when a call on it
// fails (a name the server refuses, say), so that such names do not pile
// up in the client; its errors stay counted in Stats.
func (c *Client) NextID(ctx context.Context, collection string) (ID, error) {
	if rc := (*c.caches.Load())[collection]; rc != nil {
		return rc.next(ctx, c)
	}
	id, _, err := c.nextSlow(ctx, collection, nil, nil)
	return id, err
}

// NextDocumentID returns "collection<separator>number-tag", e.g.
// "orders/10-A". Errors as NextID.
func (c *Client) NextDocumentID(ctx context.Context, collection string) (string, error) {
	id, err := c.NextID(ctx, collection)
	if err != nil {
		return "", err
	}
	return formatID(collection, c.separator, id), nil
}

// Collection is a handle on one collection of a Client, for callers that
// draw many IDs from it: the name is looked up on its first call (again
// only after a failed call forgot a collection that never received a
// range), not when the handle is made, so that a handle never called keeps
// nothing in the client. It draws from the same ranges as Client.NextID on
// that collection. Safe for concurrent use.
type Collection struct {
	name      string
	separator rune
	client    *Client
	// The collection's *rangeCache (noCacheYet until the first call),
	// replaced (failed) when the client forgot it. Read with
	// atomic.LoadPointer, a plain load on amd64: atomic.Pointer's Load is
	// a function call in Go 1.19.
	cache unsafe.Pointer
}

// noCacheYet is the cache every handle starts on: closed and forgotten,
// and in no client's table, so that its next always takes the slow path to
// the handle's failed, which looks the collection up (creating its cache
// in the table) and keeps what it found. So making a handle stores nothing,
// and a handle that has its cache calls straight into it as before.
var noCacheYet = &rangeCache{closed: true, forgotten: true}

func (h *Collection) rangeCache() *rangeCache {
	return (*rangeCache)(atomic.LoadPointer(&h.cache))
}

// Collection returns a handle on collection. It keeps nothing in the
// client: a collection the client does not hold yet is looked up on the
// handle's first call. A bad name is reported by that call, as by
// Client.NextID.
func (c *Client) Collection(collection string) *Collection {
	// A collection already held is handed over at once, so that a handle
	// made per call costs no more than Client.NextID.
	rc := (*c.caches.Load())[collection]
	if rc == nil {
		rc = noCacheYet
	}
	return &Collection{name: collection, separator: c.separator, client: c,
		cache: unsafe.Pointer(rc)}
}

// Name is the collection's name.
func (h *Collection) Name() string { return h.name }

// NextID is Client.NextID on this collection.
func (h *Collection) NextID(ctx context.Context) (ID, error) {
	// Just within the inliner's budget (go build -gcflags=-m=2: cost 80 of
	// 80; run_tests.sh checks it), so that a caller's call goes straight to
	// rangeCache.next. Go 1.19 inlines only functions of cost 20 or less
	// into a caller of over 5,000 nodes: there it stays a call.
	return (*rangeCache)(atomic.LoadPointer(&h.cache)).next(ctx, h)
}

// NextDocumentID is Client.NextDocumentID on this collection.
func (h *Collection) NextDocumentID(ctx context.Context) (string, error) {
	id, err := h.rangeCache().next(ctx, h)
	if err != nil {
		return "", err
	}
	return formatID(h.name, h.separator, id), nil
}

// AppendDocumentID appends the next document ID to buf and returns the
// extended buffer, for hot loops that reuse one buffer (no allocation once
// its capacity holds an ID). On error buf is returned unchanged.
func (h *Collection) AppendDocumentID(ctx context.Context, buf []byte) ([]byte, error) {
	id, err := h.rangeCache().next(ctx, h)
	if err != nil {
		return buf, err
	}
	return appendID(buf, h.name, h.separator, id), nil
}

// failed makes the handle the caller of its cache's next (see caller): as
// the client's, and the handle keeps the cache the client ends with, in
// place of noCacheYet or of one it forgot. A cache this call forgot (a
// name the server refuses) is not kept: the handle goes back to
// noCacheYet, so that a handle its caller keeps holds nothing of a
// collection the client dropped.
func (h *Collection) failed(ctx context.Context, rc *rangeCache, err error) (ID, error) {
	held := rc
	if rc == noCacheYet {
		rc, err = nil, nil // the first call: look the collection up
	}
	id, now, err := h.client.nextSlow(ctx, h.name, rc, err)
	if now != nil && now.isForgotten() {
		now = noCacheYet
	}
	if now != nil && now != held {
		atomic.CompareAndSwapPointer(&h.cache, unsafe.Pointer(held), unsafe.Pointer(now))
	}
	return id, err
}

func appendID(buf []byte, collection string, sep rune, id ID) []byte {
	buf = append(buf, collection...)
	if sep < utf8.RuneSelf {
		buf = append(buf, byte(sep))
	} else {
		buf = utf8.AppendRune(buf, sep)
	}
	buf = strconv.AppendInt(buf, id.Number, 10)
	buf = append(buf, '-')
	return append(buf, id.NodeTag...)
}

// formatID builds the document ID in one allocation.
func formatID(collection string, sep rune, id ID) string {
	var digits [20]byte
	num := strconv.AppendInt(digits[:0], id.Number, 10)
	var b strings.Builder
	b.Grow(len(collection) + utf8.RuneLen(sep) + len(num) + 1 + len(id.NodeTag))
	b.WriteString(collection)
	b.WriteRune(sep)
	b.Write(num)
	b.WriteByte('-')
	b.WriteString(id.NodeTag)
	return b.String()
}

// Stats returns the counters so far, and each collection's runway.
func (c *Client) Stats() Stats {
	s := Stats{
		CallsWaited:      c.stats.callsWaited.Load(),
		RangesFetched:    c.stats.rangesFetched.Load(),
		RangesPrefetched: c.stats.rangesPrefetched.Load(),
		Failovers:        c.src.failovers.Load(),
		ReturnsApplied:   c.stats.returnsApplied.Load(),
		ReturnsRefused:   c.stats.returnsRefused.Load(),
		ReturnsFailed:    c.stats.returnsFailed.Load(),
		Errors:           map[codes.Code]int64{},
		Runway:           map[string]time.Duration{},
	}
	now := c.settings.now()
	for name, rc := range *c.caches.Load() {
		if d, ok := rc.runway(now); ok {
			s.Runway[name] = d
		}
	}
	for code := range c.stats.errors {
		if n := c.stats.errors[code].Load(); n != 0 {
			s.Errors[codes.Code(code)] = n
		}
	}
	return s
}

// ReturnUnusedRanges hands the unused numbers of every collection back to
// the node that issued them, as Close does (see there), and keeps the
// client: the next NextID of a collection fetches a new range. Calls on a
// collection wait while its ranges go back (within their wait bound and
// their ctx); no number of a range handed back is handed out afterwards.
// Its next range from the same node may start right after the last number
// this client handed out, whatever the return's outcome: a return that was
// refused or failed leaves those numbers unused, never used twice
// (CONTRACT.md R8, R11). Best effort, as in Close: a failed return is
// logged and counted, never returned. Returns nil, ctx.Err() when ctx
// ended first, or ErrClosed after Close.
func (c *Client) ReturnUnusedRanges(ctx context.Context) error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	handBack(ctx, c.src, c.sortedCaches(), false)
	return ctx.Err()
}

// Close hands the unused numbers of every collection back to the node
// that issued them, then closes the connections New dialed. For each
// collection the range fetched ahead goes back whole, then the current
// range's unused tail, each with its range token, in one ReturnRanges call
// per node (up to 1000 returns per call; to a node older than ReturnRanges,
// one ReturnRange per range, in the same order); a call that fails with
// UNAVAILABLE or DEADLINE_EXCEEDED is sent again to the same node within
// RPCTimeout (a node applies each return at most once). Close first waits
// for the fetches under way (each within its deadlines) and for its
// returns, within ctx. No number of a returned range is handed out after
// Close begins: every later call returns ErrClosed.
//
// Refused returns are normal (another client took a range meanwhile). A
// return that failed is logged (Config.Logf) and counted
// (Stats.ReturnsFailed), never returned as an error (CONTRACT.md R13: the
// application can do nothing about it, and the numbers are only lost, never
// repeated). Close returns nil, or ctx.Err() when ctx ended first. A second
// Close returns ErrClosed.
func (c *Client) Close(ctx context.Context) error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed.Swap(true) {
		return ErrClosed
	}
	caches := c.sortedCaches()
	// Every collection refuses new calls before any waits for its fetch.
	for _, rc := range caches {
		rc.close()
	}
	handBack(ctx, c.src, caches, true)
	for _, conn := range c.conns {
		conn.Close()
	}
	return ctx.Err()
}

// sortedCaches lists the caches in name order, so that what goes back in
// which call does not depend on the map's order.
func (c *Client) sortedCaches() []*rangeCache {
	c.createMu.Lock()
	var caches []*rangeCache
	for _, rc := range *c.caches.Load() {
		caches = append(caches, rc)
	}
	c.createMu.Unlock()
	sort.Slice(caches, func(i, j int) bool { return caches[i].name < caches[j].name })
	return caches
}
