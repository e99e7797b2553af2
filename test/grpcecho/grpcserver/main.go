// Command grpcserver serves the grpcecho service over h2c; the e2e tests'
// local cluster maps the image name "grpcecho" to it.
//
//	grpcserver --listen :50051 --name pod-a --shutdown-delay 3s
//
// On SIGTERM it keeps serving for --shutdown-delay (the time the proxies
// need to stop sending it new calls once its endpoint is not ready), then
// stops gracefully: running calls finish, then it exits 0.
package main

import (
	"flag"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"sluice.dev/sluice/test/grpcecho"
)

func main() {
	listen := flag.String("listen", ":50051", "address to listen on")
	name := flag.String("name", os.Getenv("POD_NAME"), "name reported in answers")
	delay := flag.Duration("shutdown-delay", 0, "after SIGTERM, keep serving this long before stopping gracefully")
	flag.Parse()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		slog.Error("listening", "address", *listen, "error", err)
		os.Exit(1)
	}
	gs := grpc.NewServer()
	(&grpcecho.Server{Name: *name}).Register(gs)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		slog.Info("stopping", "after", *delay)
		time.Sleep(*delay)
		gs.GracefulStop()
	}()
	if err := gs.Serve(ln); err != nil {
		slog.Error("serving", "error", err)
		os.Exit(1)
	}
}
