package controlplane

import "strings"

// supersedes lists, for a flag, the default flags it makes invalid. kube-apiserver
// refuses --authorization-mode together with --authorization-config.
var supersedes = map[string][]string{
	"authorization-config": {"authorization-mode", "authorization-webhook-config-file", "authorization-webhook-version", "authorization-webhook-cache-authorized-ttl", "authorization-webhook-cache-unauthorized-ttl"},
}

// flagName returns the name of a "--name=value" or "--name" argument, and
// "" for anything else (a value given as a separate argument).
func flagName(arg string) string {
	if !strings.HasPrefix(arg, "-") {
		return ""
	}
	name := strings.TrimLeft(arg, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		name = name[:i]
	}
	return name
}

// mergeFlags returns defaults followed by overrides, without the defaults
// that an override replaces: one with the same flag name, or one the
// override supersedes (see supersedes). Overrides must be written
// "--name=value" for this to work.
func mergeFlags(defaults, overrides []string) []string {
	drop := map[string]bool{}
	for _, arg := range overrides {
		name := flagName(arg)
		if name == "" {
			continue
		}
		drop[name] = true
		for _, other := range supersedes[name] {
			drop[other] = true
		}
	}
	merged := make([]string, 0, len(defaults)+len(overrides))
	for _, arg := range defaults {
		if !drop[flagName(arg)] {
			merged = append(merged, arg)
		}
	}
	return append(merged, overrides...)
}
