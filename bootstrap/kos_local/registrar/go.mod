module kos.local/registrar

go 1.22.0

require (
	github.com/container-storage-interface/spec v1.10.0
	google.golang.org/grpc v1.65.0
	k8s.io/kubelet v0.31.2
)

require (
	github.com/gogo/protobuf v1.3.2 // indirect
	golang.org/x/net v0.26.0 // indirect
	golang.org/x/sys v0.21.0 // indirect
	golang.org/x/text v0.16.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240701130421-f6361c86f094 // indirect
	google.golang.org/protobuf v1.34.2 // indirect
)
