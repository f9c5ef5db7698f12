package hilo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is every error the client returns, except a caller's own context
// error (context.Canceled or context.DeadlineExceeded, returned as is when
// the caller's ctx ends first).
//
// Code is the gRPC status code the error carries: the server's when a
// server answered, else the client's own (UNAVAILABLE when no target
// answered, INTERNAL when no target gave a usable range, INVALID_ARGUMENT
// for a bad Config, FAILED_PRECONDITION after Close). An Error is a gRPC
// status error too: status.Code(err) and status.FromError(err) read it, and
// errors.Unwrap gives the gRPC status error of the call that failed, when
// there was one.
type Error struct {
	Code    codes.Code
	Message string // names the thing and the reason
	cause   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("hilo: %s: %s", e.Code, e.Message)
}

// Unwrap returns the gRPC status error behind e, or nil.
func (e *Error) Unwrap() error { return e.cause }

// GRPCStatus makes an Error a gRPC status error (status.FromError,
// status.Code).
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// Is reports whether target is an *Error with the same code and message, so
// that errors.Is(err, ErrClosed) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == e.Message
}

// ErrClosed is returned by every call on a Client after Close has begun.
var ErrClosed = &Error{Code: codes.FailedPrecondition, Message: "the client is closed"}

func newError(code codes.Code, cause error, format string, args ...interface{}) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), cause: cause}
}

// codeOf is the gRPC code of err: its status's, or the code a context error
// stands for.
func codeOf(err error) codes.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return status.Code(err)
}

// transient is true for the codes after which the same call may succeed
// on another server, or on the same one a little later.
func transient(code codes.Code) bool {
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}

// maxQuotedName is the most bytes of a collection name a message quotes.
const maxQuotedName = 256

// quoteName is name quoted for a message (Go syntax, escaped): a name is
// the caller's, of any length, so past maxQuotedName bytes only the first
// ones are quoted (cut at a character's start), then "... (N bytes)".
// Every message that names a collection quotes it with this.
func quoteName(name string) string {
	if len(name) <= maxQuotedName {
		return strconv.Quote(name)
	}
	cut := maxQuotedName
	for i := 0; i < utf8.UTFMax && cut > 0 && !utf8.RuneStart(name[cut]); i++ {
		cut--
	}
	return strconv.Quote(name[:cut]) + "... (" + strconv.Itoa(len(name)) + " bytes)"
}
