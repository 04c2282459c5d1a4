"""`ltx-jax serve`: one `LTXPipeline`, loaded and compiled once, behind an OpenAI-style video API and a web page.

    server = Server.of(pipeline, Path("jobs"), model="ltx-2.3", limits=Limits(max_frames=121))
    app = create_app(server)       # an ASGI app: uvicorn.run(app), or Starlette's TestClient(app)

`api` holds the routes, `schema` the bodies, `settings` the mapping of a request onto the `GenerationSettings` the
CLI checks, `jobs` the queue and its folder, `worker` the thread that runs the jobs, `index.html` the page.
`ltx_jax/cli/serve.py` is the command.
"""

from ltx_jax.serve.api import Server, create_app
from ltx_jax.serve.settings import Limits, RequestError

__all__ = ["Limits", "RequestError", "Server", "create_app"]
