"""The one SQL store both backends share; each backend adds a small dialect."""
