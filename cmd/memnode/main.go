package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/dmindex/dmindex/remote"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp): // -h: the usage text was asked for
	case err != nil:
		fmt.Fprintln(os.Stderr, "memnode:", err)
		os.Exit(2)
	}
}

// run serves until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("memnode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: memnode [flags]\n\nServes one memory node of a dmindex pool over TCP (see docs/deploy.md).\n\n")
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:7707", "`host:port` to listen on (port 0: any free port)")
	bytes := fs.String("bytes", "", "size of the main region, e.g. 1G or 512M (default 1G; with --file: the file's size, or 1G for a new file)")
	onChip := fs.String("onchip-bytes", "", "size of the on-chip (lock) region, e.g. 256K; 0 for none (default 256K)")
	file := fs.String("file", "", "map this memory-node `path` (created if missing; kept across restarts) instead of anonymous memory")
	token := fs.String("token", "", "shared secret clients must present (default: $DMINDEX_TOKEN)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fabricSetup := addFabricFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *token == "" {
		*token = os.Getenv("DMINDEX_TOKEN")
	}
	if *token == "" {
		return errors.New("a token is required: --token or DMINDEX_TOKEN")
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("--log-level: %v", err)
	}
	cfg := remote.ServerConfig{File: *file, Token: *token,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))}
	var err error
	if cfg.Bytes, err = parseBytes("--bytes", *bytes); err != nil {
		return err
	}
	oc, err := parseBytes("--onchip-bytes", *onChip)
	if err != nil {
		return err
	}
	switch {
	case *onChip == "":
	case oc == 0:
		cfg.OnChipBytes = -1
	default:
		cfg.OnChipBytes = int(min(oc, math.MaxInt)) // as given: the server checks it
	}
	if done, err := fabricSetup(&cfg, stdout); done || err != nil {
		return err
	}
	// The address first: a memnode that cannot listen creates no --file
	// (it left a new one behind).
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer l.Close()
	srv, err := remote.NewServer(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	main, chip := srv.Bytes()
	mem := "anonymous"
	if *file != "" {
		mem = "file " + *file
	}
	if f := srv.Fabric(); f != "" {
		mem += ", " + f
	}
	fmt.Fprintf(stdout, "memnode: ready on %s (main %d bytes, on-chip %d bytes, %s)\n", l.Addr(), main, chip, mem)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
		cfg.Logger.Info("memnode: shutting down")
		return srv.Close()
	case err := <-errc:
		return err
	}
}

// parseBytes parses a size with an optional K, M, G or T suffix (powers of
// 1024); "" is 0.
func parseBytes(flag, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	given := s
	mult := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<47)/mult {
		return 0, fmt.Errorf("%s: %q is not a size below 128T", flag, given)
	}
	return n * mult, nil
}
