package endpoint

import (
	"context"
	"encoding/base64"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// handle carries out one command: a retried one from what its first run
// wrote (retried), the delivery loop's commands (replay, recoveries)
// through their handlers, and the others through [State.Decide] once the
// egress policy has checked the URL they would store.
func (g *grain) handle(ctx actor.Context, r *request) {
	if g.core.Recall(ctx, r, r.Cmd.GetRequestId(), func(msgs []proto.Message) { g.retried(ctx, r, msgs) }) {
		return
	}
	if r.Cmd.GetListWaits() != nil {
		g.handleListWaits(ctx, r)
		return
	}
	if g.loop != nil {
		switch r.Cmd.GetCommand().(type) {
		case *internalv1.EndpointCommand_Replay:
			g.handleReplay(ctx, r)
			return
		case *internalv1.EndpointCommand_Recover:
			g.handleRecover(ctx, r)
			return
		case *internalv1.EndpointCommand_GetRecovery:
			g.handleGetRecovery(ctx, r)
			return
		case *internalv1.EndpointCommand_ListRecoveries:
			g.handleListRecoveries(ctx, r)
			return
		case *internalv1.EndpointCommand_ListOrderingKeys:
			g.handleListOrderingKeys(ctx, r)
			return
		case *internalv1.EndpointCommand_SkipOrderingKey:
			g.handleSkipOrderingKey(ctx, r)
			return
		case *internalv1.EndpointCommand_Pull:
			g.handlePull(ctx, r)
			return
		case *internalv1.EndpointCommand_Ack:
			g.handleAck(ctx, r)
			return
		}
	}
	raw := g.state.URLToCheck(r.Cmd)
	if raw == "" {
		g.decide(ctx, r, URLVerdict{})
		return
	}
	policy := g.cfg.Policy
	g.core.IO(ctx, r, func(c context.Context) (any, error) {
		u, err := policy.CheckURL(c, raw)
		v := URLVerdict{Raw: raw, Err: err}
		if err == nil {
			v.Normalised = u.String()
		}
		return v, nil
	}, func(res any, err error) {
		if err != nil {
			reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "checking the url failed; retry"))
			return
		}
		g.decide(ctx, r, res.(URLVerdict))
	})
}

// decide decides r with the policy's verdict on its URL, appends the
// events and answers with the endpoint as it stands.
func (g *grain) decide(ctx actor.Context, r *request, v URLVerdict) {
	dec, err := g.state.Decide(g.id, r.Cmd, Env{
		Now: g.cfg.Now(), Rand: g.cfg.Rand, Keyring: g.cfg.Keyring, URL: v, DefaultOverlap: g.cfg.DefaultOverlap,
	})
	if err != nil {
		reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.AsGrainError(err)})
		return
	}
	if len(dec.Events) == 0 {
		reply(ctx, r.Sender, &internalv1.EndpointReply{Endpoint: g.view()})
		return
	}
	g.core.Append(ctx, r, command.Name(r.Cmd), dec.Events, g.state.Apply, func() {
		reply(ctx, r.Sender, &internalv1.EndpointReply{Endpoint: g.view(), Secret: dec.Secret})
		if g.loop != nil {
			g.loop.wake(ctx) // a resume, a new configuration, a deletion: work may start or end
		}
	})
}

// retried answers a command whose request id this grain carried out
// before: the first answer was lost and the caller retried. It is answered
// from what the first run wrote, without running it again: the endpoint as
// it stands, with the secret that a create or a rotation made (opened
// again from its sealed copy), or the recovery it started.
func (g *grain) retried(ctx actor.Context, r *request, msgs []proto.Message) {
	rep := &internalv1.EndpointReply{}
	if g.state.Created {
		rep.Endpoint = g.view()
	}
	for _, m := range msgs {
		var sealed *hooklinev1.SealedSecret
		switch e := m.(type) {
		case *hooklinev1.EndpointCreated:
			sealed = e.GetSecret()
		case *hooklinev1.SecretRotated:
			sealed = e.GetSecret()
		case *hooklinev1.RecoveryStarted:
			if rec, ok := g.state.Recovery(e.GetRecoveryId()); ok {
				rep.Recovery = g.recoveryView(rec)
			}
		}
		if sealed == nil {
			continue
		}
		secret, err := openSecret(g.cfg.Keyring, g.id, sealed)
		if err != nil {
			g.log.Error("endpoint grain cannot open a secret to answer a retried command", "error", err)
			reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_INTERNAL, "cannot open the secret of the original request; give this node the master key that sealed it"))
			return
		}
		rep.Secret = secret
	}
	g.log.Info("command retried; answered from the original request", "request_id", r.Cmd.GetRequestId())
	reply(ctx, r.Sender, rep)
}

// openSecret returns a sealed signing secret in its "whsec_" form. The
// result is secret: never log it.
func openSecret(kr *seal.Keyring, endpointID string, s *hooklinev1.SealedSecret) (string, error) {
	key, err := kr.Open(s.GetMasterKeyId(), s.GetNonce(), s.GetCiphertext(), seal.SecretAAD(endpointID, s.GetVersion()))
	if err != nil {
		return "", err
	}
	return attempt.SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// view is the state's view with the public key, which needs the keyring.
func (g *grain) view() *controlv1.Endpoint {
	v := g.state.View()
	pk, err := g.state.PublicKey(g.cfg.Keyring)
	if err != nil {
		g.log.Error("endpoint grain cannot open its ed25519 seed", "error", err)
	}
	v.PublicKey = pk
	return v
}

// checkOwn answers NOT_FOUND unless the endpoint is live and the caller's.
func (g *grain) checkOwn(tenantID, reqTenant, reqEndpoint string) *command.Error {
	switch {
	case tenantID == "":
		return command.Invalid("tenant_id", "is required: the command must name the caller's tenant")
	case (reqTenant != "" && reqTenant != tenantID) || !g.state.Live() || g.state.TenantID != tenantID:
		return command.NotFound("endpoint_id", "endpoint %q not found", g.id)
	case reqEndpoint != "" && reqEndpoint != g.id:
		return command.Invalid("endpoint_id", "%q does not match the endpoint %q the command was sent to", reqEndpoint, g.id)
	}
	return nil
}

// statusWord names a status that is not active, for refusals.
func statusWord(s controlv1.Endpoint_Status) string {
	switch s {
	case controlv1.Endpoint_STATUS_PAUSED:
		return "paused"
	case controlv1.Endpoint_STATUS_DISABLED:
		return "disabled"
	}
	return s.String()
}
