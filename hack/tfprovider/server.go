package main

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// server serves a recorded schema. Terraform checks configurations against
// the schema itself; the provider validates nothing more, plans each
// computed attribute the configuration leaves unset as unknown, and
// refuses to apply or read anything: it exists for validate, plan and
// tests with mock_provider, never for real infrastructure.
type server struct{ schema *recorded }

func errorDiag(summary string, args ...any) []*tfprotov6.Diagnostic {
	return []*tfprotov6.Diagnostic{{Severity: tfprotov6.DiagnosticSeverityError, Summary: fmt.Sprintf(summary, args...),
		Detail: "admitfn's tf-check provider serves only a recorded schema: it validates and plans, and changes nothing."}}
}

func (s *server) GetMetadata(context.Context, *tfprotov6.GetMetadataRequest) (*tfprotov6.GetMetadataResponse, error) {
	resp := &tfprotov6.GetMetadataResponse{ServerCapabilities: &tfprotov6.ServerCapabilities{}}
	for _, name := range sorted(s.schema.resources) {
		resp.Resources = append(resp.Resources, tfprotov6.ResourceMetadata{TypeName: name})
	}
	for _, name := range sorted(s.schema.dataSources) {
		resp.DataSources = append(resp.DataSources, tfprotov6.DataSourceMetadata{TypeName: name})
	}
	return resp, nil
}

func (s *server) GetProviderSchema(context.Context, *tfprotov6.GetProviderSchemaRequest) (*tfprotov6.GetProviderSchemaResponse, error) {
	return &tfprotov6.GetProviderSchemaResponse{
		ServerCapabilities: &tfprotov6.ServerCapabilities{},
		Provider:           s.schema.provider,
		ResourceSchemas:    s.schema.resources,
		DataSourceSchemas:  s.schema.dataSources,
		Functions:          map[string]*tfprotov6.Function{},
	}, nil
}

func (s *server) GetResourceIdentitySchemas(context.Context, *tfprotov6.GetResourceIdentitySchemasRequest) (*tfprotov6.GetResourceIdentitySchemasResponse, error) {
	return &tfprotov6.GetResourceIdentitySchemasResponse{IdentitySchemas: map[string]*tfprotov6.ResourceIdentitySchema{}}, nil
}

func (s *server) ValidateProviderConfig(_ context.Context, req *tfprotov6.ValidateProviderConfigRequest) (*tfprotov6.ValidateProviderConfigResponse, error) {
	return &tfprotov6.ValidateProviderConfigResponse{PreparedConfig: req.Config}, nil
}

func (s *server) ConfigureProvider(context.Context, *tfprotov6.ConfigureProviderRequest) (*tfprotov6.ConfigureProviderResponse, error) {
	return &tfprotov6.ConfigureProviderResponse{}, nil
}

func (s *server) StopProvider(context.Context, *tfprotov6.StopProviderRequest) (*tfprotov6.StopProviderResponse, error) {
	return &tfprotov6.StopProviderResponse{}, nil
}

func (s *server) ValidateResourceConfig(_ context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	if s.schema.resources[req.TypeName] == nil {
		return &tfprotov6.ValidateResourceConfigResponse{Diagnostics: errorDiag("no resource type %q in the schema", req.TypeName)}, nil
	}
	return &tfprotov6.ValidateResourceConfigResponse{}, nil
}

func (s *server) ValidateDataResourceConfig(_ context.Context, req *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	if s.schema.dataSources[req.TypeName] == nil {
		return &tfprotov6.ValidateDataResourceConfigResponse{Diagnostics: errorDiag("no data source %q in the schema", req.TypeName)}, nil
	}
	return &tfprotov6.ValidateDataResourceConfigResponse{}, nil
}

// UpgradeResourceState reads state as the current schema's: the schema has
// one version.
func (s *server) UpgradeResourceState(_ context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	sch := s.schema.resources[req.TypeName]
	if sch == nil {
		return &tfprotov6.UpgradeResourceStateResponse{Diagnostics: errorDiag("no resource type %q in the schema", req.TypeName)}, nil
	}
	typ := sch.ValueType()
	v, err := req.RawState.UnmarshalWithOpts(typ, tfprotov6.UnmarshalOpts{ValueFromJSONOpts: tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true}})
	if err != nil {
		return &tfprotov6.UpgradeResourceStateResponse{Diagnostics: errorDiag("state of %s: %v", req.TypeName, err)}, nil
	}
	dv, err := tfprotov6.NewDynamicValue(typ, v)
	if err != nil {
		return nil, err
	}
	return &tfprotov6.UpgradeResourceStateResponse{UpgradedState: &dv}, nil
}

func (s *server) ReadResource(_ context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	return &tfprotov6.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private}, nil
}

func (s *server) PlanResourceChange(_ context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	sch := s.schema.resources[req.TypeName]
	if sch == nil {
		return &tfprotov6.PlanResourceChangeResponse{Diagnostics: errorDiag("no resource type %q in the schema", req.TypeName)}, nil
	}
	typ := sch.ValueType()
	proposed, err := req.ProposedNewState.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	config, err := req.Config.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	planned, err := planUnknown(sch.Block, proposed, config)
	if err != nil {
		return &tfprotov6.PlanResourceChangeResponse{Diagnostics: errorDiag("plan %s: %v", req.TypeName, err)}, nil
	}
	dv, err := tfprotov6.NewDynamicValue(typ, planned)
	if err != nil {
		return nil, err
	}
	return &tfprotov6.PlanResourceChangeResponse{PlannedState: &dv, PlannedPrivate: req.PriorPrivate}, nil
}

func (s *server) ApplyResourceChange(_ context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	return &tfprotov6.ApplyResourceChangeResponse{Diagnostics: errorDiag("cannot apply %s", req.TypeName)}, nil
}

func (s *server) ImportResourceState(_ context.Context, req *tfprotov6.ImportResourceStateRequest) (*tfprotov6.ImportResourceStateResponse, error) {
	return &tfprotov6.ImportResourceStateResponse{Diagnostics: errorDiag("cannot import %s", req.TypeName)}, nil
}

func (s *server) MoveResourceState(_ context.Context, req *tfprotov6.MoveResourceStateRequest) (*tfprotov6.MoveResourceStateResponse, error) {
	return &tfprotov6.MoveResourceStateResponse{Diagnostics: errorDiag("cannot move state into %s", req.TargetTypeName)}, nil
}

func (s *server) UpgradeResourceIdentity(_ context.Context, req *tfprotov6.UpgradeResourceIdentityRequest) (*tfprotov6.UpgradeResourceIdentityResponse, error) {
	return &tfprotov6.UpgradeResourceIdentityResponse{Diagnostics: errorDiag("%s has no identity schema", req.TypeName)}, nil
}

func (s *server) GenerateResourceConfig(_ context.Context, req *tfprotov6.GenerateResourceConfigRequest) (*tfprotov6.GenerateResourceConfigResponse, error) {
	return &tfprotov6.GenerateResourceConfigResponse{Diagnostics: errorDiag("cannot generate configuration for %s", req.TypeName)}, nil
}

func (s *server) ReadDataSource(_ context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	return &tfprotov6.ReadDataSourceResponse{Diagnostics: errorDiag("cannot read data source %s (mock it in tests)", req.TypeName)}, nil
}

func (s *server) GetFunctions(context.Context, *tfprotov6.GetFunctionsRequest) (*tfprotov6.GetFunctionsResponse, error) {
	return &tfprotov6.GetFunctionsResponse{Functions: map[string]*tfprotov6.Function{}}, nil
}

func (s *server) CallFunction(_ context.Context, req *tfprotov6.CallFunctionRequest) (*tfprotov6.CallFunctionResponse, error) {
	return &tfprotov6.CallFunctionResponse{Error: &tfprotov6.FunctionError{Text: "no function " + req.Name + ": the recorded schema has none"}}, nil
}

func (s *server) ValidateEphemeralResourceConfig(_ context.Context, req *tfprotov6.ValidateEphemeralResourceConfigRequest) (*tfprotov6.ValidateEphemeralResourceConfigResponse, error) {
	return &tfprotov6.ValidateEphemeralResourceConfigResponse{Diagnostics: errorDiag("no ephemeral resource %q in the schema", req.TypeName)}, nil
}

func (s *server) OpenEphemeralResource(_ context.Context, req *tfprotov6.OpenEphemeralResourceRequest) (*tfprotov6.OpenEphemeralResourceResponse, error) {
	return &tfprotov6.OpenEphemeralResourceResponse{Diagnostics: errorDiag("no ephemeral resource %q in the schema", req.TypeName)}, nil
}

func (s *server) RenewEphemeralResource(_ context.Context, req *tfprotov6.RenewEphemeralResourceRequest) (*tfprotov6.RenewEphemeralResourceResponse, error) {
	return &tfprotov6.RenewEphemeralResourceResponse{Diagnostics: errorDiag("no ephemeral resource %q in the schema", req.TypeName)}, nil
}

func (s *server) CloseEphemeralResource(_ context.Context, req *tfprotov6.CloseEphemeralResourceRequest) (*tfprotov6.CloseEphemeralResourceResponse, error) {
	return &tfprotov6.CloseEphemeralResourceResponse{Diagnostics: errorDiag("no ephemeral resource %q in the schema", req.TypeName)}, nil
}
