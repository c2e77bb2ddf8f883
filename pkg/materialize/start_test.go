package materialize_test

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/fake"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/materialize"
)

// TestServerKinds: only the kinds delivered as real objects are
// materialized, and they need a client to write their copies.
func TestServerKinds(t *testing.T) {
	t.Parallel()
	builtIn := kinds.BuiltIns()
	mat := builtIn[2]
	mat.Delivery = kinds.DeliveryMaterialize
	ks := []kinds.Kind{builtIn[0], builtIn[1], mat}
	if got := materialize.Materialized(ks); len(got) != 1 || got[0].Source != mat.Source {
		t.Errorf("Materialized = %v, want only %v", got, mat.Source)
	}
	if got, want := materialize.Resources(ks), []string{mat.Resource()}; !reflect.DeepEqual(got, want) {
		t.Errorf("Resources = %v, want %v", got, want)
	}
	for _, tt := range []struct {
		name    string
		s       materialize.Server
		wantErr string
	}{
		{name: "nothing materialized, no client", s: materialize.Server{Kinds: builtIn}},
		{name: "materialized, no client", s: materialize.Server{Kinds: ks}, wantErr: "need a host cluster client"},
		{name: "materialized, a client", s: materialize.Server{Kinds: ks, Dynamic: fake.NewSimpleDynamicClient(runtime.NewScheme())}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.s.Check()
			if (err != nil) != (tt.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Check() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
