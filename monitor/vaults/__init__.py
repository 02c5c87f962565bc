"""The vault side: facts in (``vaults.facts``), a pure engine (41 tags -> rating -> tier and
listing verdict, linked live to the depeg tiers of each vault's underlying), changes out
(``vaults.ratings``). See docs/vaults.md."""
