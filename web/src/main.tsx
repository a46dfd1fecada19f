// The flowforge web app: sign-in, workflows, a workflow's graph and editor,
// the run form, a run's live view and the run history, the approvals inbox,
// chat, knowledge, research, secrets; links to the manual and the API's page.
import { lazy, StrictMode, Suspense, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import "@xyflow/react/dist/style.css";
import "./styles.css";
import "./pages.css";
import "./dark.css";
import { api, apiKey, setApiKey } from "./api";
import { Link, match, navigate, useLocation } from "./router";
import { SignIn } from "./pages/SignIn";

// Each page is its own chunk, fetched when first shown: the first page loads
// React and the page's code, not the editor and the graph of every other one.
const Workflows = lazy(() => import("./pages/Workflows").then((m) => ({ default: m.Workflows })));
const WorkflowPage = lazy(() => import("./pages/Workflow").then((m) => ({ default: m.WorkflowPage })));
const RunForm = lazy(() => import("./pages/RunForm").then((m) => ({ default: m.RunForm })));
const RunPage = lazy(() => import("./pages/Run").then((m) => ({ default: m.RunPage })));
const History = lazy(() => import("./pages/History").then((m) => ({ default: m.History })));
const Compare = lazy(() => import("./pages/Compare").then((m) => ({ default: m.Compare })));
const Chat = lazy(() => import("./pages/Chat").then((m) => ({ default: m.Chat })));
const KnowledgeList = lazy(() => import("./pages/Knowledge").then((m) => ({ default: m.KnowledgeList })));
const KnowledgeBase = lazy(() => import("./pages/Knowledge").then((m) => ({ default: m.KnowledgeBase })));
const Research = lazy(() => import("./pages/Research").then((m) => ({ default: m.Research })));
const Approvals = lazy(() => import("./pages/Approvals").then((m) => ({ default: m.Approvals })));
const Secrets = lazy(() => import("./pages/Secrets").then((m) => ({ default: m.Secrets })));
const AppWorkflow = lazy(() => import("./pages/AppWorkflow").then((m) => ({ default: m.AppWorkflow })));

function Page({ path, query }: { path: string; query: URLSearchParams }) {
  let params;
  if (path === "/" || path === "/workflows") return <Workflows />;
  if (path === "/new-workflow") return <WorkflowPage key="new" id={null} version={null} />;
  if ((params = match("/workflows/:id/run", path))) return <RunForm id={params.id} />;
  if ((params = match("/workflows/:id", path))) {
    const version = Number(query.get("version")) || null;
    return <WorkflowPage key={`${params.id}@${version}`} id={params.id} version={version} />;
  }
  if (path === "/runs") return <History query={query} />;
  if (path === "/approvals") return <Approvals />;
  if (path === "/secrets") return <Secrets />;
  if (path === "/knowledge") return <KnowledgeList />;
  if ((params = match("/knowledge/:name", path))) return <KnowledgeBase key={params.name} name={params.name} />;
  // one Chat across its sessions: the first answer moves it to /chat/<id> without
  // losing what the page holds (the knowledge base chosen, the conversation)
  if (path === "/chat") return <Chat key="chat" sessionId={null} />;
  if ((params = match("/chat/:id", path))) return <Chat key="chat" sessionId={params.id} />;
  if (path === "/research") return <Research sessionId={null} />;
  if ((params = match("/research/:id", path))) return <Research sessionId={params.id} />;
  if ((params = match("/apps/:id", path))) return <AppWorkflow key={params.id} id={params.id} />;
  if (path === "/runs/compare") return <Compare a={query.get("a") ?? ""} b={query.get("b") ?? ""} />;
  if ((params = match("/runs/:id", path))) return <RunPage key={params.id} id={params.id} />;
  return <main><h1>Not found</h1><p role="alert">There is no page at {path}.</p></main>;
}

function Redirect({ to }: { to: string }) {
  useEffect(() => navigate(to, true), [to]);
  return null;
}

function Me() {
  const [me, setMe] = useState<{ name: string; role: string } | null>(null);
  useEffect(() => { api("GET", "/api/me").then(setMe).catch(() => undefined); }, []);
  return me ? <span className="me">Signed in as {me.name}{me.role === "admin" ? " (admin)" : ""}</span> : null;
}

function App() {
  const { path, query } = useLocation();
  if (!apiKey() && path !== "/signin") {
    return <Redirect to={`/signin?next=${encodeURIComponent(path + location.search)}`} />;
  }
  if (path === "/signin") return <SignIn />;
  return (
    <>
      <header className="top">
        <a className="skip" href="#content">Skip to content</a>
        <nav aria-label="Main">
          <strong className="brand">flowforge</strong>
          <Link to="/">Workflows</Link>
          <Link to="/runs">Runs</Link>
          <Link to="/approvals">Approvals</Link>
          <Link to="/chat">Chat</Link>
          <Link to="/knowledge">Knowledge</Link>
          <Link to="/research">Research</Link>
          <Link to="/secrets">Secrets</Link>
          <a href="/manual/">Manual</a>
          <a href="/docs">API</a>
          <Me />
          <button type="button" className="link" onClick={() => { setApiKey(null); navigate("/signin"); }}>
            Sign out
          </button>
        </nav>
      </header>
      <div id="content">
        <Suspense fallback={<main><p role="status">Loading...</p></main>}>
          <Page path={path} query={query} />
        </Suspense>
      </div>
    </>
  );
}

createRoot(document.getElementById("root")!).render(<StrictMode><App /></StrictMode>);
