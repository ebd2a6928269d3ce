package endpoint

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/eventtype"
	"github.com/hookline/hookline/operational"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Limits on an endpoint's settings.
const (
	MaxEventTypes     = 100
	MaxEventTypeLen   = 128
	MaxDescriptionLen = 500
	MaxRatePerSecond  = 10_000
	MaxBurst          = 10_000
	MaxInFlight       = 1_000
	MinTimeoutMs      = 1_000
	MaxTimeoutMs      = 30_000
	MaxAttempts       = 100
	MaxMetadata       = 50
	MaxMetadataKeyLen = 64
	MaxMetadataValLen = 512
)

func configOf(s *controlv1.EndpointSettings) *hooklinev1.EndpointConfig {
	if s == nil {
		return &hooklinev1.EndpointConfig{}
	}
	return &hooklinev1.EndpointConfig{
		Url:           s.GetUrl(),
		EventTypes:    slices.Clone(s.GetEventTypes()),
		Description:   s.GetDescription(),
		RatePerSecond: s.GetRatePerSecond(),
		Burst:         s.GetBurst(),
		MaxInFlight:   s.GetMaxInFlight(),
		TimeoutMs:     s.GetTimeoutMs(),
		MaxAttempts:   s.GetMaxAttempts(),
		SignEd25519:   s.GetSignEd25519(),
		Metadata:      maps.Clone(s.GetMetadata()),
		Filter:        s.GetFilter(),
		Ordering:      orderingOf(s.GetOrdering(), s.GetKeyFailure()),
		Pull:          s.GetDelivery() == deliveryPull,
		Headers:       maps.Clone(s.GetHeaders()),
		HeaderPrefix:  s.GetHeaderPrefix(),
		Oauth2:        oauth2ConfigOf(s.GetAuth().GetOauth2()),
		Mtls:          mtlsConfigOf(s.GetAuth().GetMtls()),
	}
}

// Words of the ordering and delivery settings.
const (
	orderingNone       = "none"
	orderingKey        = "key"
	keyFailureContinue = "continue"
	keyFailurePark     = "park"
	deliveryPush       = "push"
	deliveryPull       = "pull"
)

// orderingOf maps the settings' ordering and key_failure (validated) to
// the configuration's KeyOrdering.
func orderingOf(ordering, keyFailure string) hooklinev1.KeyOrdering {
	switch {
	case ordering != orderingKey:
		return hooklinev1.KeyOrdering_KEY_ORDERING_NONE
	case keyFailure == keyFailurePark:
		return hooklinev1.KeyOrdering_KEY_ORDERING_PARK
	default:
		return hooklinev1.KeyOrdering_KEY_ORDERING_CONTINUE
	}
}

// orderingWords is orderingOf's inverse: an unordered endpoint shows
// neither word, an ordered one both.
func orderingWords(o hooklinev1.KeyOrdering) (ordering, keyFailure string) {
	switch o {
	case hooklinev1.KeyOrdering_KEY_ORDERING_CONTINUE:
		return orderingKey, keyFailureContinue
	case hooklinev1.KeyOrdering_KEY_ORDERING_PARK:
		return orderingKey, keyFailurePark
	}
	return "", ""
}

// SettingsOf is the API's view of an endpoint configuration (copied, so
// the caller may change it); nil for nil.
func SettingsOf(c *hooklinev1.EndpointConfig) *controlv1.EndpointSettings {
	if c == nil {
		return nil
	}
	ordering, keyFailure := orderingWords(c.GetOrdering())
	delivery := ""
	if c.GetPull() {
		delivery = deliveryPull
	}
	return &controlv1.EndpointSettings{
		Url:           c.GetUrl(),
		EventTypes:    slices.Clone(c.GetEventTypes()),
		Description:   c.GetDescription(),
		RatePerSecond: c.GetRatePerSecond(),
		Burst:         c.GetBurst(),
		MaxInFlight:   c.GetMaxInFlight(),
		TimeoutMs:     c.GetTimeoutMs(),
		MaxAttempts:   c.GetMaxAttempts(),
		SignEd25519:   c.GetSignEd25519(),
		Metadata:      maps.Clone(c.GetMetadata()),
		Filter:        c.GetFilter(),
		Ordering:      ordering,
		KeyFailure:    keyFailure,
		Delivery:      delivery,
		Headers:       maps.Clone(c.GetHeaders()),
		HeaderPrefix:  c.GetHeaderPrefix(),
		// Secret headers show their names only.
		SecretHeaderNames: slices.Sorted(maps.Keys(c.GetSealedHeaders())),
		Auth:              authOf(c.GetOauth2(), c.GetMtls()),
		UrlPasswordSet:    c.GetUrlPassword() != nil,
	}
}

// ApplyMask returns current with the fields named by paths taken from
// update. A path names a field of EndpointSettings, bare ("url") or under
// "settings." ("settings.url"); "settings" or "*" replaces every field. With
// no paths, every field set (non-zero) in update is taken, as AIP-134 asks of
// a request without a mask. A field named but left unset in update is
// cleared. An unknown path gives an INVALID_ARGUMENT on update_mask.
func ApplyMask(current, update *controlv1.EndpointSettings, paths []string) (*controlv1.EndpointSettings, error) {
	out := proto.CloneOf(current)
	if out == nil {
		out = &controlv1.EndpointSettings{}
	}
	if update == nil {
		update = &controlv1.EndpointSettings{}
	}
	src, dst := update.ProtoReflect(), out.ProtoReflect()
	fields := src.Descriptor().Fields()
	if len(paths) == 0 {
		n := 0
		src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			dst.Set(fd, v)
			n++
			return true
		})
		if n == 0 {
			return nil, command.Invalid("update_mask", "names no field and settings set none: name the fields to change, e.g. \"settings.url\"")
		}
		return proto.CloneOf(out), nil
	}
	for _, p := range paths {
		name := strings.TrimPrefix(p, "settings.")
		if p == "settings" || p == "*" || p == "settings.*" {
			return proto.CloneOf(update), nil
		}
		if parent, child, ok := strings.Cut(name, "."); ok {
			if err := applyNested(src, dst, parent, child, p); err != nil {
				return nil, err
			}
			continue
		}
		fd := fields.ByName(protoreflect.Name(name))
		if fd == nil {
			var known []string
			for i := 0; i < fields.Len(); i++ {
				known = append(known, string(fields.Get(i).Name()))
			}
			return nil, command.Invalid("update_mask", "unknown path %q: use one of %s (optionally prefixed by \"settings.\"), or \"settings\" for all", p, strings.Join(known, ", "))
		}
		if src.Has(fd) {
			dst.Set(fd, src.Get(fd))
		} else {
			dst.Clear(fd)
		}
	}
	return proto.CloneOf(out), nil
}

// applyNested applies a path into a message field of the settings
// ("auth.mtls", or a leaf such as "auth.oauth2.client_id", as the REST
// gateway names the fields of a body): that field is taken from src, or
// cleared when src leaves it unset.
func applyNested(src, dst protoreflect.Message, parent, rest, path string) error {
	pfd := src.Descriptor().Fields().ByName(protoreflect.Name(parent))
	if pfd == nil || pfd.Kind() != protoreflect.MessageKind || pfd.IsList() || pfd.IsMap() {
		return command.Invalid("update_mask", "unknown path %q: %q has no fields to name", path, parent)
	}
	child, deeper, nested := strings.Cut(rest, ".")
	cfd := pfd.Message().Fields().ByName(protoreflect.Name(child))
	if cfd == nil {
		return command.Invalid("update_mask", "unknown path %q: %s has no field %q", path, parent, child)
	}
	from, sub := src.Get(pfd).Message(), dst.Mutable(pfd).Message()
	if nested {
		return applyNested(from, sub, child, deeper, path)
	}
	if from.Has(cfd) {
		sub.Set(cfd, from.Get(cfd))
	} else {
		sub.Clear(cfd)
	}
	return nil
}

// maskTouches reports whether an update with paths changes the settings'
// field (an empty mask touches whatever update sets).
func maskTouches(update *controlv1.EndpointSettings, paths []string, field string) bool {
	if len(paths) == 0 {
		if update == nil {
			return false
		}
		fd := update.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(field))
		return fd != nil && update.ProtoReflect().Has(fd)
	}
	for _, p := range paths {
		switch p {
		case field, "settings." + field, "settings", "*", "settings.*":
			return true
		}
	}
	return false
}

// validateSettings checks everything but the URL's egress policy, which
// needs DNS and runs before Decide; now dates the client certificate's
// check. Fields are named as in the request:
// "settings.…".
func validateSettings(s *controlv1.EndpointSettings, now time.Time) error {
	switch d := s.GetDelivery(); {
	case d != "" && d != deliveryPush && d != deliveryPull:
		return command.Invalid("settings.delivery", "is %q; use \"push\" (the default: Hookline POSTs to url) or \"pull\" (the consumer pulls)", d)
	case d == deliveryPull && s.GetUrl() != "":
		return command.Invalid("settings.url", "is set on a pull endpoint; leave it out: its consumer pulls its deliveries (POST /v1/webhook-endpoints/{endpoint_id}/pull)")
	case d != deliveryPull && s.GetUrl() == "":
		return command.Invalid("settings.url", "is required: give the https URL that receives the webhooks, or set settings.delivery to \"pull\"")
	}
	types := s.GetEventTypes()
	if len(types) == 0 {
		return command.Invalid("settings.event_types", "is empty: list the event types to receive, or \"*\" for all")
	}
	if len(types) > MaxEventTypes {
		return command.Invalid("settings.event_types", "has %d entries; use at most %d (or \"*\")", len(types), MaxEventTypes)
	}
	seen := map[string]bool{}
	for _, t := range types {
		switch {
		case t == "" || len(t) > MaxEventTypeLen:
			return command.Invalid("settings.event_types", "entry %q must be 1 to %d characters", t, MaxEventTypeLen)
		case strings.IndexFunc(t, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
			return command.Invalid("settings.event_types", "entry %q has spaces or control characters; use names like \"invoice.paid\"", t)
		case seen[t]:
			return command.Invalid("settings.event_types", "lists %q twice; list each event type once", t)
		case strings.Contains(t, "*"):
			if err := eventtype.CheckEntry(t); err != nil {
				return command.Invalid("settings.event_types", "%v", err)
			}
		}
		seen[t] = true
	}
	if err := operational.CheckSubscription(types); err != nil {
		return command.Invalid("settings.event_types", "%v", err)
	}
	if d := s.GetDescription(); !utf8.ValidString(d) || len(d) > MaxDescriptionLen {
		return command.Invalid("settings.description", "must be valid UTF-8 of at most %d bytes", MaxDescriptionLen)
	}
	if r := s.GetRatePerSecond(); math.IsNaN(r) || r < 0 || r > MaxRatePerSecond {
		return command.Invalid("settings.rate_per_second", "must be between 0 and %d (0 means the default)", MaxRatePerSecond)
	}
	if b := s.GetBurst(); b < 0 || b > MaxBurst {
		return command.Invalid("settings.burst", "must be between 0 and %d (0 means the default)", MaxBurst)
	}
	if n := s.GetMaxInFlight(); n < 0 || n > MaxInFlight {
		return command.Invalid("settings.max_in_flight", "must be between 0 and %d (0 means the default)", MaxInFlight)
	}
	if ms := s.GetTimeoutMs(); ms != 0 && (ms < MinTimeoutMs || ms > MaxTimeoutMs) {
		return command.Invalid("settings.timeout_ms", "must be 0 (the default, 15 s) or between %d and %d", MinTimeoutMs, MaxTimeoutMs)
	}
	if n := s.GetMaxAttempts(); n < 0 || n > MaxAttempts {
		return command.Invalid("settings.max_attempts", "must be between 0 and %d (0 means the default)", MaxAttempts)
	}
	switch s.GetOrdering() {
	case "", orderingNone, orderingKey:
	default:
		return command.Invalid("settings.ordering", "is %q; use \"none\" (the default) or \"key\" (one delivery of an ordering key at a time)", s.GetOrdering())
	}
	switch kf := s.GetKeyFailure(); {
	case kf != "" && kf != keyFailureContinue && kf != keyFailurePark:
		return command.Invalid("settings.key_failure", "is %q; use \"continue\" (the default) or \"park\"", kf)
	case kf != "" && s.GetOrdering() != orderingKey:
		return command.Invalid("settings.key_failure", "applies only to an endpoint ordered by key; set settings.ordering to \"key\" too, or leave key_failure out")
	}
	if err := attempt.CheckHeaderPrefix(s.GetHeaderPrefix()); err != nil {
		return command.Invalid("settings.header_prefix", "%v", err)
	}
	if err := validateHeaders(s); err != nil {
		return err
	}
	if err := validateAuth(s, now); err != nil {
		return err
	}
	md := s.GetMetadata()
	if len(md) > MaxMetadata {
		return command.Invalid("settings.metadata", "has %d entries; use at most %d", len(md), MaxMetadata)
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if k == "" || len(k) > MaxMetadataKeyLen || !utf8.ValidString(k) {
			return command.Invalid("settings.metadata", "key %q must be 1 to %d bytes of UTF-8", k, MaxMetadataKeyLen)
		}
		if v := md[k]; len(v) > MaxMetadataValLen || !utf8.ValidString(v) {
			return command.Invalid("settings.metadata", "value of %q must be at most %d bytes of UTF-8", k, MaxMetadataValLen)
		}
	}
	return nil
}

// validateHeaders checks the static headers, plain and secret, as one set:
// the names of the secret headers kept by an update are in
// secret_header_names.
func validateHeaders(s *controlv1.EndpointSettings) error {
	secret := s.GetSecretHeaders()
	if len(s.GetHeaders())+len(secret)+len(s.GetSecretHeaderNames()) > 0 && s.GetDelivery() == deliveryPull {
		return command.Invalid("settings.headers", "are set on a pull endpoint, which is sent nothing; leave them out")
	}
	if err := attempt.CheckHeaders(s.GetHeaders(), s.GetHeaderPrefix()); err != nil {
		return command.Invalid("settings.headers", "%v", err)
	}
	all := maps.Clone(s.GetHeaders())
	if all == nil {
		all = map[string]string{}
	}
	if names := s.GetSecretHeaderNames(); len(names) > 0 {
		secret = maps.Clone(secret)
		if secret == nil {
			secret = make(map[string]string, len(names))
		}
		for _, name := range names {
			secret[name] = ""
		}
	}
	for _, name := range slices.Sorted(maps.Keys(secret)) {
		if _, ok := all[name]; ok {
			return command.Invalid("settings.secret_headers", "name %q is in headers too; keep it in one of them", name)
		}
		all[name] = secret[name]
	}
	if err := attempt.CheckHeaders(all, s.GetHeaderPrefix()); err != nil {
		return command.Invalid("settings.secret_headers", "%v", err)
	}
	return nil
}
