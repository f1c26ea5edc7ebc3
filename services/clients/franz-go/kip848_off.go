//go:build !kip848

package main

import "github.com/twmb/franz-go/pkg/kgo"

// serverSideBalancer: franz-go before v1.22.0 has no KIP-848 consumer group option.
func serverSideBalancer() (kgo.Opt, bool) { return nil, false }
