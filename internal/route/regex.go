package route

import (
	"cmp"
	"regexp"
	"slices"
)

// Regular-expression routes (PathRegex): ingress-nginx's use-regex paths
// and Gateway API's RegularExpression path match. Translation compiles
// and bounds every pattern before it reaches a Config; New compiles them
// again, anchored at the start of the path, and leaves out any that does
// not compile. Like nginx's regex locations they are tried after Exact
// routes and before Prefix ones, the longest pattern first (ingress-nginx
// orders its locations by path length), then in Config order. Go's regexp
// runs in time linear in the path.

type regexRoute struct {
	re   *regexp.Regexp
	r    *Route
	cond *condMatcher // r's Conditions compiled; nil without (conditions.go)
}

func (v *vhost) addRegex(r *Route) {
	re, err := CompilePath(r.Path)
	if err != nil {
		return
	}
	x := regexRoute{re: re, r: r}
	if r.Conditions != nil {
		x.cond = compileConditions(r)
	}
	v.regex = append(v.regex, x)
}

func (v *vhost) sortRegex() {
	slices.SortStableFunc(v.regex, func(a, b regexRoute) int {
		return cmp.Compare(len(b.r.Path), len(a.r.Path))
	})
}

func (v *vhost) matchRegex(path string) *Route {
	for _, x := range v.regex {
		if x.re.MatchString(path) {
			return x.r
		}
	}
	return nil
}

// CompilePath compiles a PathRegex route's pattern (or a ReplaceRegex
// PathModifier's) anchored at the start of the path, as the proxy
// matches it. The pattern must compile alone first, so that it cannot
// close the anchoring group ("a)|(b").
func CompilePath(pattern string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + pattern + ")")
}
