// Package integration tests juneau's API against a real etcd + kube-apiserver with the
// real kubectl. One control plane serves the whole package.
package integration

import (
	"testing"

	"github.com/loutres/juneau/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }
