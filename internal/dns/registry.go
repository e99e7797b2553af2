package dns

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// OwnerPrefix is the first label of every ownership TXT record: the TXT
// record of "www.example.com" is "sluice-owner.www.example.com". A prefix,
// not the name itself, because a CNAME cannot share its name with a TXT
// record.
const OwnerPrefix = "sluice-owner"

// wildcardLabel stands for a leading "*" in the name of an ownership
// record: the TXT record of "*.apps.example.com" is
// "sluice-owner._wildcard.apps.example.com" (a "*" that is not the first
// label is not a wildcard, and some servers refuse it). Ingress hosts
// cannot contain "_", so no host maps to the same TXT name.
const wildcardLabel = "_wildcard"

// heritage opens every ownership TXT value.
const heritage = "heritage=sluice"

// maxOwnerText bounds the TXT value Parse accepts.
const maxOwnerText = 4096

// Ref names the object that owns a record: an Ingress, or a Gateway API
// object (a Gateway for its listener hostnames, an HTTPRoute or GRPCRoute
// for its hostnames).
type Ref struct {
	Namespace, Name, UID string
	// Kind is "" for an Ingress, else KindGateway, KindHTTPRoute or
	// KindGRPCRoute.
	Kind string
}

// Kinds of Gateway API owners (Ref.Kind).
const (
	KindGateway   = "Gateway"
	KindHTTPRoute = "HTTPRoute"
	KindGRPCRoute = "GRPCRoute"
)

// ownerKeys maps the ownership-text key naming the owner to its Kind.
var ownerKeys = map[string]string{"ingress": "", "gateway": KindGateway, "httproute": KindHTTPRoute, "grpcroute": KindGRPCRoute}

// String is "namespace/name" for an Ingress, "Kind namespace/name" for
// the others.
func (r Ref) String() string {
	if r.Kind == "" {
		return r.Namespace + "/" + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// Object is what messages call the owner: "Ingress namespace/name",
// "HTTPRoute namespace/name", ...
func (r Ref) Object() string {
	if r.Kind == "" {
		return "Ingress " + r.String()
	}
	return r.String()
}

// Owner is the content of an ownership TXT record. Its text form is one
// string of ";"-separated key=value fields, in this order:
//
//	heritage=sluice;owner=OWNER-ID;ingress=NAMESPACE/NAME;uid=UID[;unwanted-since=UNIX-SECONDS];sig=v1:HMAC
//
// A name published for a Gateway API object names it with its kind in
// place of "ingress": gateway=, httproute= or grpcroute=NAMESPACE/NAME
// (versions before Gateway API DNS read such a record as foreign, so they
// never touch it).
//
// unwanted-since is present while the name waits out the delete delay: it
// is written when the name stops being wanted. sig is the HMAC-SHA256, by
// an ownership key (Keys), of the owned name and every other field: the
// owner ID is public in every record, so only the signature tells a
// record sluice wrote from one anybody with write access to TXT records
// could write.
type Owner struct {
	// ID is the controller's --dns-owner-id.
	ID string
	// Ingress is the object the name was published for (Ref.Kind: an
	// Ingress or a Gateway API object).
	Ingress Ref
	// UnwantedSince is when sluice first saw the name wanted by no
	// Ingress; zero while it is wanted.
	UnwantedSince time.Time
	// Sig is the signature (Keys.Sign); "" in records written before
	// ownership records were signed.
	Sig string
}

// OwnerName returns the name of the ownership TXT record of name.
func OwnerName(name string) string {
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		return OwnerPrefix + "." + wildcardLabel + "." + rest
	}
	return OwnerPrefix + "." + name
}

// OwnedName is the inverse of OwnerName: the name an ownership TXT record
// at txtName is about, and false when txtName is no ownership name.
func OwnedName(txtName string) (string, bool) {
	rest, ok := strings.CutPrefix(txtName, OwnerPrefix+".")
	if !ok || rest == "" {
		return "", false
	}
	if w, ok := strings.CutPrefix(rest, wildcardLabel+"."); ok {
		return "*." + w, w != ""
	}
	return rest, true
}

// Format returns o's TXT text.
func (o Owner) Format() string {
	key := "ingress"
	if o.Ingress.Kind != "" {
		key = strings.ToLower(o.Ingress.Kind)
	}
	s := heritage + ";owner=" + o.ID + ";" + key + "=" + o.Ingress.Namespace + "/" + o.Ingress.Name + ";uid=" + o.Ingress.UID
	if !o.UnwantedSince.IsZero() {
		s += ";unwanted-since=" + strconv.FormatInt(o.UnwantedSince.Unix(), 10)
	}
	if o.Sig != "" {
		s += ";sig=" + o.Sig
	}
	return s
}

// errNotOwner: a TXT value that is no sluice ownership record.
var errNotOwner = errors.New("not a sluice ownership record")

// ParseOwner parses an ownership TXT value. Text that is not one (another
// tool's TXT record, a truncated value) is an error wrapping errNotOwner;
// it never panics.
func ParseOwner(s string) (Owner, error) {
	if len(s) > maxOwnerText {
		return Owner{}, fmt.Errorf("parsing ownership text of %d bytes: too long: %w", len(s), errNotOwner)
	}
	fields := strings.Split(s, ";")
	if fields[0] != heritage {
		return Owner{}, fmt.Errorf("parsing ownership text %q: no %s: %w", trim(s), heritage, errNotOwner)
	}
	var o Owner
	seen := map[string]bool{}
	named := false
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || seen[k] {
			return Owner{}, fmt.Errorf("parsing ownership text %q: bad field %q: %w", trim(s), trim(f), errNotOwner)
		}
		seen[k] = true
		switch k {
		case "owner":
			o.ID = v
		case "ingress", "gateway", "httproute", "grpcroute":
			ns, name, ok := strings.Cut(v, "/")
			if !ok || ns == "" || name == "" {
				return Owner{}, fmt.Errorf("parsing ownership text %q: %s %q is not namespace/name: %w", trim(s), k, trim(v), errNotOwner)
			}
			if named {
				return Owner{}, fmt.Errorf("parsing ownership text %q: more than one owning object: %w", trim(s), errNotOwner)
			}
			named = true
			o.Ingress.Namespace, o.Ingress.Name, o.Ingress.Kind = ns, name, ownerKeys[k]
		case "uid":
			o.Ingress.UID = v
		case "sig":
			o.Sig = v
		case "unwanted-since":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return Owner{}, fmt.Errorf("parsing ownership text %q: unwanted-since %q is not a positive number of seconds: %w", trim(s), trim(v), errNotOwner)
			}
			o.UnwantedSince = time.Unix(n, 0)
		default:
			// Unknown fields are kept for later versions: ignored.
		}
	}
	if o.ID == "" || o.Ingress.Name == "" {
		return Owner{}, fmt.Errorf("parsing ownership text %q: no owner or no ingress: %w", trim(s), errNotOwner)
	}
	return o, nil
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
