"""The policy config under version control: which version is in force at start, how a
running paika follows new versions, and how `/gpu config set` edits a document.

The truth is the `config_versions` table (storage/queries/config.py); the policy file given
by PAIKA_CONFIG is recorded there at start, never silently preferred to what is stored."""
