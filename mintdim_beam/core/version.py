"""Our version, recorded in every manifest (`mintdim_beam_version`)."""
__version__ = "0.2.0"
