package cnitest

import (
	"testing"

	"github.com/loutres/juneau/test/framework"
)

// TestMain removes the juneau binary the tests built (framework.JuneauBinary).
func TestMain(m *testing.M) { framework.Main(m) }
