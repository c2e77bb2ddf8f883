package review

import "github.com/implicit-dev/implicit-apiserver/pkg/webhook"

// Type is an alias of webhook.Type.
type Type = webhook.Type
