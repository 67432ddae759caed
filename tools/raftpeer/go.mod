module github.com/exo-rack/exo/tools/raftpeer

go 1.26.0

require go.etcd.io/raft/v3 v3.6.0

require (
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	google.golang.org/protobuf v1.33.0 // indirect
)
