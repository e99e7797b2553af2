// Command incluster is a test workload for the local cluster: it builds
// client-go's in-cluster configuration (service-account token, CA,
// KUBERNETES_SERVICE_HOST) and answers GET / with "ok UID" after reading its
// own Pod through the API, or 500 with the error. It proves pods reach the
// API server exactly as in a real cluster.
//
//	incluster --listen $(POD_IP):8080
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	listen := flag.String("listen", ":8080", "address to listen on")
	flag.Parse()
	cfg, err := rest.InClusterConfig()
	if err != nil {
		slog.Error("in-cluster config", "error", err)
		os.Exit(1)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		slog.Error("client", "error", err)
		os.Exit(1)
	}
	ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		pod, err := client.CoreV1().Pods(ns).Get(r.Context(), name, metav1.GetOptions{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "ok %s\n", pod.UID)
	})
	slog.Info("incluster listening", "address", *listen, "host", cfg.Host)
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		slog.Error("serving", "error", err)
		os.Exit(1)
	}
}
