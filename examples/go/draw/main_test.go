package main

import (
	"context"
	"strings"
	"testing"

	hilo "github.com/hilo-id/hilo/clients/go"
	"google.golang.org/grpc/codes"
)

// Issue 26, section 3: a draw keeps going only through UNAVAILABLE; any
// other error while drawing makes it exit 1.
func TestOnlyUnavailableIsWaitedOutWhileDrawing(t *testing.T) {
	cases := []struct {
		err  error
		wait bool
	}{
		{&hilo.Error{Code: codes.Unavailable, Message: "no hilo server answered NextRange"}, true},
		{&hilo.Error{Code: codes.DeadlineExceeded, Message: "waited 3s for a range"}, false},
		{&hilo.Error{Code: codes.Internal, Message: "no hilo server gave a usable range"}, false},
		{&hilo.Error{Code: codes.InvalidArgument, Message: "collection name is 300 bytes"}, false},
		{hilo.ErrClosed, false},
		{context.Canceled, false},
	}
	for _, tc := range cases {
		if got := waitOut(tc.err); got != tc.wait {
			t.Errorf("waitOut(%v) = %v, want %v", tc.err, got, tc.wait)
		}
	}
}

// Returns that failed because their node was down are no error of the
// draw; any other failure during Close is, and is named with its count.
func TestCloseFailuresCountOnlyWhenNoNodeWasDown(t *testing.T) {
	before := hilo.Stats{Errors: map[codes.Code]int64{codes.Unavailable: 4, codes.Internal: 1}}
	down := hilo.Stats{Errors: map[codes.Code]int64{codes.Unavailable: 6, codes.DeadlineExceeded: 2,
		codes.Internal: 1}}
	if err := closeErrors(before, down); err != nil {
		t.Errorf("returns failed with UNAVAILABLE and DEADLINE_EXCEEDED only: %v, want nil", err)
	}
	other := hilo.Stats{Errors: map[codes.Code]int64{codes.Unavailable: 5, codes.Internal: 3,
		codes.PermissionDenied: 1}}
	err := closeErrors(before, other)
	if err == nil {
		t.Fatal("returns failed with INTERNAL and PERMISSION_DENIED: nil, want an error")
	}
	for _, want := range []string{"2 Internal", "1 PermissionDenied"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("error %q counts the UNAVAILABLE returns", err)
	}
}
