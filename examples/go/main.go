// Command hilo-example calls a hilo server through the generated Go stubs.
//
//	GO111MODULE=off GOPATH=$PWD/build/gen/go:/usr/share/gocode \
//	    go run examples/go/main.go 127.0.0.1:50051 [COLLECTION]
//
// Uses a new collection (a unique name unless one is given), so the ranges
// are exact: 1-32, then 33-64 for a second client, 65-128 for a client that
// reports its previous range, and after handing back all of that range but
// its first number, 66-97. Each range carries a range_token (never 0); the
// return sends it and is applied, the same return sent again is refused (a
// node applies a return at most once), and a return without a token fails
// with FAILED_PRECONDITION. A bad collection name must fail with
// INVALID_ARGUMENT. Exits 1 on any difference.
package main

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	hilov1 "github.com/hilo-id/hilo/gen/go/hilo/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func check(what string, got, want interface{}) {
	if !reflect.DeepEqual(got, want) {
		fmt.Printf("FAIL %s: got %v, want %v\n", what, got, want)
		os.Exit(1)
	}
	fmt.Printf("ok   %s: %v\n", what, got)
}

func bounds(r *hilov1.NextRangeResponse) [2]int64 {
	return [2]int64{r.GetLow(), r.GetHigh()}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hilo-example HOST:PORT [COLLECTION]")
		os.Exit(2)
	}
	target := os.Args[1]
	collection := fmt.Sprintf("example-go-%d-%d", os.Getpid(), time.Now().UnixNano())
	if len(os.Args) > 2 {
		collection = os.Args[2]
	}

	conn, err := grpc.Dial(target, grpc.WithInsecure())
	if err != nil {
		fmt.Println("FAIL dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	client := hilov1.NewHiLoClient(conn)

	call := func(req *hilov1.NextRangeRequest) (*hilov1.NextRangeResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return client.NextRange(ctx, req)
	}
	next := func(req *hilov1.NextRangeRequest) *hilov1.NextRangeResponse {
		resp, err := call(req)
		if err != nil {
			fmt.Println("FAIL NextRange:", err)
			os.Exit(1)
		}
		return resp
	}

	first := next(&hilov1.NextRangeRequest{Collection: collection})
	check("first range", bounds(first), [2]int64{1, 32})
	check("node tag", first.GetNodeTag(), "A")
	check("range_at set", first.GetRangeAt() != nil, true)

	second := next(&hilov1.NextRangeRequest{Collection: collection})
	check("second range starts after the first", second.GetLow(), first.GetHigh()+1)
	check("second range", bounds(second), [2]int64{33, 64})

	third := next(&hilov1.NextRangeRequest{
		Collection:  collection,
		LastSize:    second.GetHigh() - second.GetLow() + 1,
		LastRangeAt: second.GetRangeAt(),
		LastMax:     second.GetHigh(),
	})
	check("third range (size doubled)", bounds(third), [2]int64{65, 128})

	check("range_token set", third.GetRangeToken() != 0, true)

	returnRange := func(req *hilov1.ReturnRangeRequest) (*hilov1.ReturnRangeResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return client.ReturnRange(ctx, req)
	}
	mustReturn := func(req *hilov1.ReturnRangeRequest) *hilov1.ReturnRangeResponse {
		resp, err := returnRange(req)
		if err != nil {
			fmt.Println("FAIL ReturnRange:", err)
			os.Exit(1)
		}
		return resp
	}

	// Used only 65: hand back 66-128, with the range's token.
	tail := &hilov1.ReturnRangeRequest{
		Collection: collection,
		End:        third.GetHigh(),
		Last:       third.GetLow(),
		NodeTag:    third.GetNodeTag(),
		RangeToken: third.GetRangeToken(),
	}
	returned := mustReturn(tail)
	check("return of the unused tail applied", returned.GetApplied(), true)
	check("max after the return", returned.GetMax(), int64(65))
	// The token is spent: a retried or duplicated return changes nothing.
	again := mustReturn(tail)
	check("the same return again is refused",
		[]interface{}{again.GetApplied(), again.GetMax()}, []interface{}{false, int64(65)})
	_, err = returnRange(&hilov1.ReturnRangeRequest{
		Collection: collection,
		End:        third.GetHigh(),
		Last:       third.GetLow(),
		NodeTag:    third.GetNodeTag(),
	})
	check("return without a range_token", status.Code(err), codes.FailedPrecondition)
	check("next range continues after the return",
		bounds(next(&hilov1.NextRangeRequest{Collection: collection})),
		[2]int64{66, 97})

	for _, bad := range []string{"", "bad\ncollection", strings.Repeat("x", 257)} {
		_, err := call(&hilov1.NextRangeRequest{Collection: bad})
		check(fmt.Sprintf("bad collection %.12q", bad), status.Code(err), codes.InvalidArgument)
	}
	fmt.Println("go example: all checks passed")
}
