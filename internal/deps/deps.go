// Package deps pins module dependencies while the packages using them are
// being written in parallel. Delete once every import below is used elsewhere.
package deps

import (
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "golang.org/x/net/http2"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/discovery/v1"
	_ "k8s.io/api/networking/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "k8s.io/client-go/util/workqueue"
	_ "sigs.k8s.io/yaml"
)
