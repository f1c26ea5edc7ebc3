//go:build kip848

package main

import "github.com/twmb/franz-go/pkg/kgo"

// serverSideBalancer is franz-go's KIP-848 consumer group (v1.22.0 and later: the build passes
// -tags kip848 for those).
func serverSideBalancer() (kgo.Opt, bool) { return kgo.ServerSideBalancer(), true }
