// kos-probe: what the end-to-end tests run in pods of a real cluster.
//
//	probe serve             answer every HTTP request on :8080 with this pod's name and
//	                        the address the request came from ("<name> <peer ip>")
//	probe get URL           print what URL answers (exit 1 when it does not)
//	probe resolve NAME      print NAME's addresses (exit 1 when it has none)
//	probe write FILE TEXT   write TEXT to FILE and sync it to its disk
//	probe read FILE         print FILE
//	probe size DIR          print the size in bytes of the file system DIR is on
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe serve | get URL | resolve NAME | write FILE TEXT | read FILE | size DIR")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		name, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			fmt.Fprintf(w, "%s %s\n", name, host)
		})
		srv := &http.Server{Addr: ":8080"}
		go func() {
			c := make(chan os.Signal, 1)
			signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
			<-c
			srv.Shutdown(context.Background())
		}()
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "get":
		client := &http.Client{Timeout: 5 * time.Second}
		resp, err := client.Get(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		io.Copy(os.Stdout, resp.Body)
	case "resolve":
		addrs, err := net.LookupHost(os.Args[2])
		if err != nil || len(addrs) == 0 {
			fmt.Fprintln(os.Stderr, "no addresses:", err)
			os.Exit(1)
		}
		for _, a := range addrs {
			fmt.Println(a)
		}
	case "write":
		f, err := os.Create(os.Args[2])
		if err == nil {
			_, err = f.WriteString(os.Args[3])
		}
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		f.Close()
	case "read":
		data, err := os.ReadFile(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(data)
	case "size":
		var fs syscall.Statfs_t
		if err := syscall.Statfs(os.Args[2], &fs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(fs.Blocks * uint64(fs.Bsize))
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}
