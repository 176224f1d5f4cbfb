"""Studies around the paper: other pairs (`crosslingual`), domains and adaptation (`domains`,
`adapt`), training seeds (`seeds`), and attention interventions (`around`)."""
