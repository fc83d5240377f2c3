// kos-csi-registrar registers a CSI driver with the kubelet, as upstream's
// node-driver-registrar does, on the rehearsal cloud only: the Go module proxy serves no
// release of github.com/kubernetes-csi/node-driver-registrar. On OpenStack the formula
// runs upstream's image (kubeadm:csi:images:registrar); this program takes the flags of
// that image that the formula passes, so one manifest serves both.
//
// The protocol is the kubelet's plugin watcher: a gRPC Registration service on a socket
// in the kubelet's plugins_registry directory, named <driver>-reg.sock, which answers
// GetInfo with the driver's name and the path of its CSI socket on the host
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1/api.proto; node-driver-registrar's
// cmd/csi-node-driver-registrar/node_register.go and README.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type registrar struct {
	driver   string
	endpoint string
}

func (r registrar) GetInfo(ctx context.Context, req *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driver,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

// NotifyRegistrationStatus: a refused registration ends the container, so that the
// kubelet restarts it and it registers again (upstream does the same).
func (r registrar) NotifyRegistrationStatus(ctx context.Context, status *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !status.PluginRegistered {
		log.Fatalf("the kubelet refused %s: %s", r.driver, status.Error)
	}
	log.Printf("the kubelet registered %s", r.driver)
	return &registerapi.RegistrationStatusResponse{}, nil
}

// driverName asks the CSI driver its name (GetPluginInfo), waiting for its socket.
func driverName(address string, timeout time.Duration) (string, error) {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil {
			return info.GetName(), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no answer from the CSI driver at %s: %w", address, err)
		}
		time.Sleep(2 * time.Second)
	}
}

func main() {
	csiAddress := flag.String("csi-address", "/run/csi/socket", "the CSI driver's socket, as this container sees it")
	kubeletPath := flag.String("kubelet-registration-path", "", "the CSI driver's socket, as the kubelet sees it on the host")
	registrationDir := flag.String("plugin-registration-path", "/registration", "the kubelet's plugins_registry directory, as this container sees it")
	timeout := flag.Duration("timeout", 5*time.Minute, "how long to wait for the CSI driver")
	flag.Int("v", 0, "log level (accepted for upstream's flags; this program logs little)")
	flag.Parse()
	if *kubeletPath == "" {
		log.Fatal("--kubelet-registration-path is required: the CSI socket's path on the host")
	}

	driver, err := driverName(*csiAddress, *timeout)
	if err != nil {
		log.Fatal(err)
	}
	socket := filepath.Join(*registrationDir, driver+"-reg.sock")
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		log.Fatal(err)
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	registerapi.RegisterRegistrationServer(server, registrar{driver: driver, endpoint: *kubeletPath})

	// The kubelet unregisters a plugin whose socket is gone.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		server.Stop()
		os.Remove(socket)
		os.Exit(0)
	}()
	log.Printf("registering %s (%s) at %s", driver, *kubeletPath, socket)
	if err := server.Serve(listener); err != nil {
		log.Fatal(err)
	}
}
