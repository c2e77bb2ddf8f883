//go:build tools

package tools

import (
	_ "k8s.io/sample-apiserver"
)
