"""Small text environments usable as users through EnvironmentInteraction."""
