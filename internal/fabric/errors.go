//go:build fabric

package fabric

import "errors"

// Sentinel errors. Errors returned by this package wrap them with details;
// test with errors.Is.
var (
	// ErrUnavailable: the peer refused the connection, shut it down, died,
	// or did not complete a batch before its watchdog expired. The Conn is
	// broken: every later Do returns ErrUnavailable (and ErrBroken); Close
	// it and dial again.
	ErrUnavailable = errors.New("fabric: peer unavailable")
	// ErrAccess: the target rejected an operation (an address outside
	// every registered region, a wrong key). With verbs it also breaks the
	// Conn.
	ErrAccess = errors.New("fabric: remote access error")
	// ErrInvalid: a malformed Op (unknown kind, empty READ or WRITE, a
	// misaligned atomic, a payload above the provider's maximum message
	// size), configuration or region.
	ErrInvalid = errors.New("fabric: invalid argument")
	// ErrUnsupported: no provider offers what was asked (the named provider
	// is missing, or has no FI_EP_MSG endpoint with FI_RMA|FI_ATOMIC at the
	// address), or the provider cannot run an operation kind (verbs atomics
	// on libfabric < 2.2 without the workaround; see the package doc).
	ErrUnsupported = errors.New("fabric: unsupported")
	// ErrClosed: the Conn or Server was closed.
	ErrClosed = errors.New("fabric: closed")
	// ErrDeadline: a batch given a deadline (DoBy) did not complete by it.
	// If some of it was posted, its operations may or may not have taken
	// effect, and may still, and the Conn is broken as after
	// ErrUnavailable; if none was, the Conn is intact.
	ErrDeadline = errors.New("fabric: batch deadline passed")
	// ErrCanceled: the context of a batch given one (DoContext) was
	// cancelled before the batch completed. As after ErrDeadline, the
	// operations of a batch cut in flight may or may not have taken effect
	// and the Conn is broken; a batch none of which was posted (the error
	// then wraps ErrNotPosted too) leaves the Conn intact.
	ErrCanceled = errors.New("fabric: batch canceled")
	// ErrNotPosted is wrapped, beside ErrDeadline or ErrCanceled, by the
	// error of a batch given up before any of its operations was posted:
	// nothing of it takes effect, and the Conn is intact.
	ErrNotPosted = errors.New("fabric: nothing of the batch was posted")
	// ErrBroken: Do on a Conn that an earlier batch broke (with
	// ErrUnavailable, ErrDeadline or, with verbs, ErrAccess): nothing of
	// this batch was posted. The error wraps ErrUnavailable too.
	ErrBroken = errors.New("fabric: connection broken by an earlier batch")
)
