import{r as f}from"./index-B9HOPBAD.js";function s(r,t){f.useEffect(()=>{let e=!0;return r(()=>e),()=>{e=!1}},t)}export{s as u};
