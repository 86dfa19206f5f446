/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package testenv

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/kilomesh/kilomesh/provider/internal/clients"
)

// The types below carry just enough of provider-kubernetes' config kinds for
// crossplane-runtime's provider config reconciler, the code provider-
// kubernetes runs to block the deletion of a config in use. Running that
// reconciler in the tests shows that provider-kilomesh's usages protect the
// configs it uses. The spec is kept verbatim so that updates preserve it.

var pkGroupVersion = schema.GroupVersion{Group: clients.Group, Version: clients.Version}

// PKProviderConfig stands for a provider-kubernetes ProviderConfig or
// ClusterProviderConfig.
type PKProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   *apiextensionsv1.JSON     `json:"spec,omitempty"`
	Status xpv2.ProviderConfigStatus `json:"status,omitempty"`
}

// GetCondition of the config.
func (p *PKProviderConfig) GetCondition(ct xpv2.ConditionType) xpv2.Condition {
	return p.Status.GetCondition(ct)
}

// SetConditions of the config.
func (p *PKProviderConfig) SetConditions(c ...xpv2.Condition) { p.Status.SetConditions(c...) }

// GetUsers of the config.
func (p *PKProviderConfig) GetUsers() int64 { return p.Status.Users }

// SetUsers of the config.
func (p *PKProviderConfig) SetUsers(i int64) { p.Status.Users = i }

// DeepCopyObject of the config.
func (p *PKProviderConfig) DeepCopyObject() runtime.Object {
	out := &PKProviderConfig{TypeMeta: p.TypeMeta}
	p.DeepCopyInto(&out.ObjectMeta)
	out.Spec = p.Spec.DeepCopy()
	p.Status.DeepCopyInto(&out.Status)
	return out
}

// PKClusterProviderConfig is the cluster-scoped kind.
type PKClusterProviderConfig struct{ PKProviderConfig }

// DeepCopyObject of the config.
func (p *PKClusterProviderConfig) DeepCopyObject() runtime.Object {
	c, _ := p.PKProviderConfig.DeepCopyObject().(*PKProviderConfig)
	return &PKClusterProviderConfig{PKProviderConfig: *c}
}

// PKProviderConfigUsage stands for a provider-kubernetes ProviderConfigUsage.
type PKProviderConfigUsage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	xpv2.TypedProviderConfigUsage `json:",inline"`
}

// GetProviderConfigReference of the usage.
func (p *PKProviderConfigUsage) GetProviderConfigReference() xpv2.ProviderConfigReference {
	return p.ProviderConfigReference
}

// SetProviderConfigReference of the usage.
func (p *PKProviderConfigUsage) SetProviderConfigReference(r xpv2.ProviderConfigReference) {
	p.ProviderConfigReference = r
}

// GetResourceReference of the usage.
func (p *PKProviderConfigUsage) GetResourceReference() xpv2.TypedReference {
	return p.ResourceReference
}

// SetResourceReference of the usage.
func (p *PKProviderConfigUsage) SetResourceReference(r xpv2.TypedReference) {
	p.ResourceReference = r
}

// DeepCopyObject of the usage.
func (p *PKProviderConfigUsage) DeepCopyObject() runtime.Object {
	out := &PKProviderConfigUsage{TypeMeta: p.TypeMeta, TypedProviderConfigUsage: p.TypedProviderConfigUsage}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// PKProviderConfigUsageList is a list of usages.
type PKProviderConfigUsageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PKProviderConfigUsage `json:"items"`
}

// GetItems of the list.
func (l *PKProviderConfigUsageList) GetItems() []resource.ProviderConfigUsage {
	out := make([]resource.ProviderConfigUsage, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}

// DeepCopyObject of the list.
func (l *PKProviderConfigUsageList) DeepCopyObject() runtime.Object {
	out := &PKProviderConfigUsageList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		c, _ := l.Items[i].DeepCopyObject().(*PKProviderConfigUsage)
		out.Items = append(out.Items, *c)
	}
	return out
}

// AddProviderKubernetesToScheme registers the config kinds.
func AddProviderKubernetesToScheme(s *runtime.Scheme) error {
	s.AddKnownTypeWithName(pkGroupVersion.WithKind(clients.KindProviderConfig), &PKProviderConfig{})
	s.AddKnownTypeWithName(pkGroupVersion.WithKind(clients.KindProviderConfig+"List"), &pkProviderConfigList{})
	s.AddKnownTypeWithName(pkGroupVersion.WithKind(clients.KindClusterProviderConfig), &PKClusterProviderConfig{})
	s.AddKnownTypeWithName(pkGroupVersion.WithKind(clients.KindClusterProviderConfig+"List"), &pkClusterProviderConfigList{})
	s.AddKnownTypeWithName(pkGroupVersion.WithKind(clients.KindProviderConfigUsage), &PKProviderConfigUsage{})
	s.AddKnownTypeWithName(pkGroupVersion.WithKind(clients.KindProviderConfigUsage+"List"), &PKProviderConfigUsageList{})
	metav1.AddToGroupVersion(s, pkGroupVersion)
	return nil
}

// SetupProviderConfigProtection runs crossplane-runtime's provider config
// reconciler for both provider-kubernetes config kinds, as provider-
// kubernetes does.
func SetupProviderConfigProtection(mgr ctrl.Manager) error {
	for _, kind := range []struct {
		name string
		obj  resource.ProviderConfig
	}{
		{clients.KindProviderConfig, &PKProviderConfig{}},
		{clients.KindClusterProviderConfig, &PKClusterProviderConfig{}},
	} {
		r := providerconfig.NewReconciler(mgr, resource.ProviderConfigKinds{
			Config:    pkGroupVersion.WithKind(kind.name),
			Usage:     pkGroupVersion.WithKind(clients.KindProviderConfigUsage),
			UsageList: pkGroupVersion.WithKind(clients.KindProviderConfigUsage + "List"),
		})
		if err := ctrl.NewControllerManagedBy(mgr).
			Named("providerconfig-"+kind.name).
			For(kind.obj).
			Watches(&PKProviderConfigUsage{}, &resource.EnqueueRequestForProviderConfig{Kind: kind.name}).
			Complete(r); err != nil {
			return err
		}
	}
	return nil
}

type pkProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PKProviderConfig `json:"items"`
}

func (l *pkProviderConfigList) DeepCopyObject() runtime.Object {
	out := &pkProviderConfigList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		c, _ := l.Items[i].DeepCopyObject().(*PKProviderConfig)
		out.Items = append(out.Items, *c)
	}
	return out
}

type pkClusterProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PKClusterProviderConfig `json:"items"`
}

func (l *pkClusterProviderConfigList) DeepCopyObject() runtime.Object {
	out := &pkClusterProviderConfigList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		c, _ := l.Items[i].DeepCopyObject().(*PKClusterProviderConfig)
		out.Items = append(out.Items, *c)
	}
	return out
}
