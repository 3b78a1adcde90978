package datapath

// Check verifies every object Setup creates: links (present, up, MTU),
// addresses, neighbours, routes, rules, the sysctls that matter and the
// tbf qdiscs when bandwidth is limited. It changes nothing. Its error
// names the first broken object, e.g.
// `rule 512 "to 192.168.1.5 lookup main": missing` or
// `link eth0 in pod: down`.
func Check(s *Spec) error {
	e, err := openEnv(s, true)
	if err != nil {
		return err
	}
	defer e.close()
	_, err = e.walk(kindLinks[s.Kind].check, object.check)
	return err
}
