package haproxy

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// Server admin-state bits as printed by "show servers state" (srv_admin_state,
// HAProxy's SRV_ADMF_* flags).
const (
	admForcedMaint    = 0x01
	admInheritedMaint = 0x02
	admConfigMaint    = 0x04
	admForcedDrain    = 0x08
	admInheritedDrain = 0x10
	admResolvMaint    = 0x20
	admHostnameMaint  = 0x40

	admMaint = admForcedMaint | admInheritedMaint | admConfigMaint | admResolvMaint | admHostnameMaint
	admDrain = admForcedDrain | admInheritedDrain
)

// stateRow is one server line of "show servers state BACKEND".
type stateRow struct {
	Backend string
	Name    string
	Addr    netip.Addr // invalid when HAProxy prints something else ("-", a name)
	Port    uint16
	Admin   int // srv_admin_state bits
	// SinceChange is srv_time_since_last_change in seconds (an admin
	// change such as entering drain resets it); -1 if absent.
	SinceChange int
	// CheckPort is srv_check_port (0: none or absent).
	CheckPort uint16
}

// parseServersState parses "show servers state" output (format version 1):
//
//	1
//	# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ...
//	3 be 2 sluice-10-0-0-1-80 10.0.0.1 2 0 100 100 3 15 3 2 6 0 0 0 - 80 - 0 0 - - 0
//
// Columns are found by header name. Any line it cannot understand fails the
// whole parse: callers must never act on a partial list.
func parseServersState(out string) ([]stateRow, error) {
	lines := splitLines(out)
	if len(lines) == 0 {
		return nil, errors.New("parsing servers state: empty answer")
	}
	if lines[0] != "1" {
		if err := classify(out); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("parsing servers state: unsupported format version %q", truncate(lines[0], 40))
	}
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "# ") {
		return nil, errors.New("parsing servers state: missing header")
	}
	col := map[string]int{}
	header := strings.Fields(lines[1][2:])
	for i, h := range header {
		col[h] = i
	}
	for _, need := range []string{"be_name", "srv_name", "srv_addr", "srv_admin_state", "srv_port"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("parsing servers state: header lacks %s", need)
		}
	}
	rows := make([]stateRow, 0, len(lines)-2)
	for n, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != len(header) {
			return nil, fmt.Errorf("parsing servers state line %d: %d fields, header has %d", n+3, len(f), len(header))
		}
		r := stateRow{Backend: f[col["be_name"]], Name: f[col["srv_name"]], SinceChange: -1}
		if a, err := netip.ParseAddr(f[col["srv_addr"]]); err == nil {
			r.Addr = a.Unmap()
		}
		port, err := strconv.ParseUint(f[col["srv_port"]], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("parsing servers state line %d: srv_port: %w", n+3, err)
		}
		r.Port = uint16(port)
		adm, err := strconv.ParseUint(f[col["srv_admin_state"]], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("parsing servers state line %d: srv_admin_state: %w", n+3, err)
		}
		r.Admin = int(adm)
		if i, ok := col["srv_check_port"]; ok {
			if v, err := strconv.ParseUint(f[i], 10, 16); err == nil {
				r.CheckPort = uint16(v)
			}
		}
		if i, ok := col["srv_time_since_last_change"]; ok {
			if v, err := strconv.ParseUint(f[i], 10, 31); err == nil {
				r.SinceChange = int(v)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// statRow is one server line of "show stat BACKEND 4 -1".
type statRow struct {
	Proxy       string
	Name        string
	Status      string // "UP", "DOWN", "UP 1/2", "MAINT", "DRAIN", "NOLB", "no check", ...
	CheckStatus string // "INI", "L7OK", "L4CON", ... without the "* " in-progress mark
	CheckCode   string
	CheckDesc   string
	Sessions    int // scur; -1 if absent
}

// parseShowStat parses the CSV of "show stat": a "# pxname,svname,..." header
// and one record per proxy or server. Frontend, backend and listener rows are
// skipped. Fields may be quoted (HAProxy quotes text containing commas).
func parseShowStat(out string) ([]statRow, error) {
	text := strings.TrimLeft(out, "\r\n")
	if !strings.HasPrefix(text, "# ") {
		if err := classify(out); err != nil {
			return nil, err
		}
		return nil, errors.New("parsing stat: missing header")
	}
	r := csv.NewReader(strings.NewReader(text[2:]))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	r.ReuseRecord = false
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("parsing stat header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		if _, dup := col[h]; !dup && h != "" {
			col[h] = i
		}
	}
	for _, need := range []string{"pxname", "svname", "status"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("parsing stat: header lacks %s", need)
		}
	}
	get := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return rec[i]
		}
		return ""
	}
	var rows []statRow
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parsing stat: %w", err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != len(header) {
			// Every HAProxy stat line carries all columns; anything else
			// means a truncated or foreign answer.
			return nil, fmt.Errorf("parsing stat: record with %d fields, header has %d", len(rec), len(header))
		}
		sv := get(rec, "svname")
		if t := get(rec, "type"); t != "" && t != "2" || sv == "FRONTEND" || sv == "BACKEND" {
			continue
		}
		row := statRow{
			Proxy:       get(rec, "pxname"),
			Name:        sv,
			Status:      get(rec, "status"),
			CheckStatus: strings.TrimPrefix(get(rec, "check_status"), "* "),
			CheckCode:   get(rec, "check_code"),
			CheckDesc:   get(rec, "check_desc"),
			Sessions:    -1,
		}
		if v, err := strconv.ParseUint(get(rec, "scur"), 10, 31); err == nil {
			row.Sessions = int(v)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// splitLines returns the non-empty lines of out without line ends.
func splitLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
