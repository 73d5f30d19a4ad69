package remote_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/remote"
)

// TestTCPLostOutcomeCrashes: a batch holding a WRITE, CAS or FAA that was
// in flight when its memory node stopped answering fails with
// ErrUnavailable and leaves its client crashed (Client.Crashed; every later
// call fails with ErrCrashed, wrapping that ErrUnavailable), since it may
// have landed, and does land once the node answers again; a READ in flight at the same time fails the same
// way and leaves its client working, and so does a READ refused at once
// because the node is known down, while a CAS refused so crashes its client
// (its caller may have needed it to land: a lock's release). A READ whose
// client posted an unsignaled WRITE on the node before it crashes its client
// too: the WRITE may be lost; and so does a client that posted one and
// posts nothing more (an idle one), when the connection breaks.
func TestTCPLostOutcomeCrashes(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	px := newStallProxy(t, ts.addr)
	p := downPool(t, px.addr(), timeout)
	clients, _ := dialledClients(t, p, 3)
	reader, casser, poster, late, idle := clients[0], clients[1], clients[2], clients[3], clients[4]
	cns := []*remote.ComputeNode{clients[0].ComputeNode(), clients[3].ComputeNode()}
	ctx := context.Background()
	a, err := reader.Alloc(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	const swapped = 0x5eed

	px.freeze()
	// The posters' WRITEs leave unsignaled: nothing says whether they land.
	for _, c := range []*remote.Client{poster, idle} {
		if err := c.Post(ctx, []remote.Op{remote.Write(a.Add(8), []byte("posted!!"))}); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = reader.Read(ctx, a, make([]byte, 8)) })
	wg.Go(func() { _, errs[1] = casser.CAS(ctx, a, 0, swapped) })
	wg.Go(func() { errs[2] = poster.Read(ctx, a, make([]byte, 8)) })
	wg.Wait()
	for i, name := range []string{"READ", "CAS", "READ after an unsignaled WRITE"} {
		if !errors.Is(errs[i], remote.ErrUnavailable) {
			t.Errorf("%s in flight on the stopped node: %v, want ErrUnavailable", name, errs[i])
		}
	}
	if reader.Crashed() {
		t.Error("a READ of unknown outcome crashed its client")
	}
	if !casser.Crashed() {
		t.Error("a CAS of unknown outcome left its client working")
	}
	if !poster.Crashed() {
		t.Error("a READ after an unsignaled WRITE of unknown outcome left its client working")
	}
	for end := time.Now().Add(time.Second); !idle.Crashed() && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if !idle.Crashed() {
		t.Error("an idle client whose unsignaled WRITE's connection broke did not crash")
	}
	if n := cns[0].Crashes() + cns[1].Crashes(); n != 3 {
		t.Errorf("the compute nodes count %d crashed clients, want 3", n)
	}
	// The node is known down now: verbs are refused before they leave.
	if err := late.Read(ctx, a, make([]byte, 8)); !errors.Is(err, remote.ErrUnavailable) {
		t.Errorf("READ on the node known down: %v, want ErrUnavailable", err)
	}
	if late.Crashed() {
		t.Error("a READ refused before it left crashed its client")
	}
	if _, err := late.CAS(ctx, a, 0, 1); !errors.Is(err, remote.ErrUnavailable) {
		t.Errorf("CAS on the node known down: %v, want ErrUnavailable", err)
	}
	if !late.Crashed() {
		t.Error("a CAS refused on the node known down left its client working")
	}
	if _, err := casser.FAA(ctx, a, 1); !errors.Is(err, remote.ErrCrashed) || !errors.Is(err, remote.ErrUnavailable) {
		t.Errorf("FAA of the crashed client: %v, want ErrCrashed wrapping the ErrUnavailable that crashed it", err)
	}
	if err := casser.Read(ctx, a, make([]byte, 8)); !errors.Is(err, remote.ErrCrashed) {
		t.Errorf("READ of the crashed client: %v, want ErrCrashed", err)
	}

	px.thaw()
	rc := []*remote.Client{reader}
	waitRecovered(t, rc, a.Add(16)) // its FAAs on the node still down crash it
	reader = rc[0]
	// The CAS the proxy held lands after all (the memory node executes
	// what it received): the crashed client had lost its outcome, not its
	// effect.
	buf := make([]byte, 8)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if err := reader.Read(ctx, a, buf); err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint64(buf) == swapped || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the word after the node answered again: %#x (the lost CAS swapped in %#x)", binary.LittleEndian.Uint64(buf), swapped)
}

// TestTCPContextOnStoppedNode: on a memnode process stopped by SIGSTOP, a
// verb whose context has a deadline shorter than TCPConfig.Timeout returns
// the context's error at the deadline (it waited for Timeout before); a
// READ leaves its client working, an FAA crashes it (it may still land).
// The abandoned READ's reply, which comes once the node continues, is
// dropped: it is never copied into the buffer of the READ that gave up, and
// the client's next READ gets its own reply. A node whose callers all gave
// up is still found down once a Timeout passed without its reply, and
// later verbs are refused at once.
func TestTCPContextOnStoppedNode(t *testing.T) {
	const timeout = 2 * time.Second
	const deadline = 300 * time.Millisecond
	nodes := memnodetest.Start(t, 1, memnodetest.Options{Bytes: 4 << 20})
	p, err := remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: memnodetest.Addrs(nodes),
		Token: memnodetest.Token, Timeout: timeout, DialTimeout: timeout}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cn := p.NewComputeNode()
	reader, adder := cn.NewClient(), cn.NewClient()
	ctx := context.Background()
	a, err := reader.Alloc(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Write(ctx, a, []byte("first...second..")); err != nil {
		t.Fatal(err)
	}
	if _, err := adder.FAA(ctx, a.Add(16), 0); err != nil {
		t.Fatal(err)
	}

	nodes[0].Pause()
	gaveUp := bytes.Repeat([]byte{0xee}, 8)
	errs := make([]error, 2)
	took := make([]time.Duration, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		dctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		t0 := time.Now()
		errs[0] = reader.Read(dctx, a, gaveUp)
		took[0] = time.Since(t0)
	})
	wg.Go(func() {
		dctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		t0 := time.Now()
		_, errs[1] = adder.FAA(dctx, a.Add(16), 1)
		took[1] = time.Since(t0)
	})
	wg.Wait()
	for i, name := range []string{"READ", "FAA"} {
		t.Logf("%s with a deadline of %v on the stopped node: %v after %v", name, deadline, errs[i], took[i])
		if !errors.Is(errs[i], context.DeadlineExceeded) {
			t.Errorf("%s: %v, want the context's error", name, errs[i])
		}
		if took[i] > deadline+timeout/4 {
			t.Errorf("%s returned after %v, its deadline %v (Timeout %v)", name, took[i], deadline, timeout)
		}
	}
	if reader.Crashed() {
		t.Error("a READ given up crashed its client")
	}
	if !adder.Crashed() {
		t.Error("an FAA given up in flight left its client working")
	}

	// Nobody waits for a reply any more, and the node is still found down
	// once its abandoned requests are a Timeout old: a READ is refused at
	// once, or dials as the probe (given Timeout/2), and the next READ is
	// refused at once. (Were the connection kept, each READ would wait out
	// a Timeout on it.)
	time.Sleep(timeout + 200*time.Millisecond)
	for i := range 2 {
		t0 := time.Now()
		err := reader.Read(ctx, a, make([]byte, 8))
		d := time.Since(t0)
		t.Logf("READ %d on the node whose requests went unanswered for a Timeout: %v after %v", i, err, d)
		if bound := []time.Duration{timeout/2 + 200*time.Millisecond, 100 * time.Millisecond}[i]; !errors.Is(err, remote.ErrUnavailable) || d > bound {
			t.Errorf("READ %d on the node found down: %v after %v, want ErrUnavailable within %v", i, err, d, bound)
		}
	}
	if reader.Crashed() {
		t.Error("a READ refused crashed its client")
	}

	nodes[0].Resume()
	own := make([]byte, 8)
	for end := time.Now().Add(15 * time.Second); ; {
		err := reader.Read(ctx, a.Add(8), own)
		if err == nil {
			break
		}
		if !errors.Is(err, remote.ErrUnavailable) || time.Now().After(end) {
			t.Fatalf("READ after the node continued: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if string(own) != "second.." {
		t.Errorf("the READ after the node continued got %q, want %q", own, "second..")
	}
	if !bytes.Equal(gaveUp, bytes.Repeat([]byte{0xee}, 8)) {
		t.Errorf("the buffer of the READ that gave up was written: %q", gaveUp)
	}
	v, err := reader.FAA(ctx, a.Add(16), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the counter the given-up FAA aimed at holds %d", v)
	if v > 1 {
		t.Errorf("counter %d, want 0 or 1", v)
	}
}
