"""The Streamlit console: the only package that imports streamlit."""
